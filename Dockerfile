# CypherTurn Gym with its local Neo4j (Java 17 + Maven resolve the Neo4j 5.26 jars at build time).
# Build: docker build -t cypherturn-gym .     Run: docker run --rm cypherturn-gym
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless openjdk-17-jdk-headless maven \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir -e ".[dev]" \
 && python -c "from graphs.server import build_launcher; build_launcher()"
CMD ["sh", "-c", "python -m graphs load && python -m graphs status"]
