"""The utterance wordings as data: ``benchmark/wordings.yaml`` loaded by ``benchmark.wordings`` (pure
Python, no database needed). The shipped file loads into what ``benchmark.templates`` renders, read-only;
a malformed file fails with an error naming the file and the entry; the file ships with the package."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import pytest
import yaml

from benchmark import templates
from benchmark.session import PERSONAS
from benchmark.wordings import REGISTERS, WordingsError, default_path, load_wordings

KNOWN = dict(families=templates.FAMILIES, personas=PERSONAS, ambiguous=templates.AMBIGUOUS_FAMILIES)
RAW = yaml.safe_load(default_path().read_text(encoding="utf-8"))
N_STUDENT = len(RAW["personas"]["student"]["wrappers"])  # where an appended wrapper lands


def _load(tmp_path: Path, raw) -> None:
    path = tmp_path / "wordings.yaml"
    path.write_text(raw if isinstance(raw, str) else yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    load_wordings(path, **KNOWN)


def test_the_shipped_file_is_what_the_templates_render():
    w = load_wordings(**KNOWN)
    assert set(w.questions) == set(templates.FAMILIES) and set(w.wrappers) == set(PERSONAS)
    assert all(tuple(regs) == REGISTERS for regs in w.questions.values())
    assert dict(w.questions) == dict(templates._CORES) and dict(w.wrappers) == dict(templates._WRAPPERS)
    assert w.clarifications["AGG_AVG_AMBIGUOUS"] == "I meant their average {prop}."
    # the annotations sit on the wrappers they describe
    assert "Sorry for my English. {core}" in w.first_turn_only
    assert "Sorry for my English. {core}" in w.wrappers["non_native_speaker"]
    assert "{core} Deduplicate the result." in w.listing_only
    assert "{core} Exact values, please, no rounding." in w.figure_only
    assert "Just the figure is fine." in w.figure_only and "The full list, please." in w.listing_only  # tails too
    assert not w.figure_only & w.listing_only
    assert not (w.first_turn_only & w.later_turns_only)
    # families that share their wordings in the file (a YAML alias) render the same wordings
    assert w.questions["OPENING_ANCHORED"] == w.questions["TOPIC_SHIFT_ANCHORED"]


def test_the_wordings_are_read_only():
    w = templates._WORDINGS
    with pytest.raises(TypeError):
        w.questions["EXPAND"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        w.questions["EXPAND"]["plain"] = ()  # type: ignore[index]
    with pytest.raises(AttributeError):
        w.wrappers["journalist"].append("{core} Extra.")  # type: ignore[attr-defined]
    assert isinstance(w.topic_shift_leads, tuple) and isinstance(w.first_turn_only, frozenset)


def _broken(edit):
    raw = copy.deepcopy(RAW)
    edit(raw)
    return raw


@pytest.mark.parametrize("raw, fragment", [
    ("questions: [unclosed", "not valid YAML"),
    (_broken(lambda r: r.pop("clarifications")), "top level: unknown [] / missing ['clarifications']"),
    (_broken(lambda r: r.update(extra=1)), "top level: unknown ['extra']"),
    (_broken(lambda r: r["questions"].pop("EXPAND")), "questions: unknown [] / missing ['EXPAND']"),
    (_broken(lambda r: r["questions"].update(EXPAND_TWICE=r["questions"]["EXPAND"])),
     "questions: unknown ['EXPAND_TWICE']"),
    (_broken(lambda r: r["questions"]["EXPAND"].pop("terse")), "questions.EXPAND: unknown [] / missing ['terse']"),
    (_broken(lambda r: r["questions"]["EXPAND"]["plain"].append(3)), f"questions.EXPAND.plain[{len(RAW['questions']['EXPAND']['plain'])}]: a wording must be"),
    (_broken(lambda r: r["questions"]["EXPAND"].update(tech=[])), "questions.EXPAND.tech: must be a non-empty list"),
    (_broken(lambda r: r["questions"]["EXPAND"]["plain"].__setitem__(0, "Which {target_noun are")),
     "questions.EXPAND.plain[0]: 'Which {target_noun are'"),
    (_broken(lambda r: r["topic_shift_leads"].__setitem__(1, "  ")), "topic_shift_leads[1]: a wording must be"),
    (_broken(lambda r: r["personas"].pop("student")), "personas: unknown [] / missing ['student']"),
    (_broken(lambda r: r["personas"]["student"].update(register="formal")),
     "personas.student.register: 'formal' is not one of"),
    (_broken(lambda r: r["personas"]["student"]["wrappers"].append("No core here.")),
     f"personas.student.wrappers[{N_STUDENT}]: 'No core here.': a wrapper holds {{core}} or {{lc}}"),
    (_broken(lambda r: r["personas"]["student"]["wrappers"].append({"text": "{core} Hm.", "turn": "last"})),
     f"personas.student.wrappers[{N_STUDENT}].turn: 'last' is not one of ['first', 'later']"),
    (_broken(lambda r: r["personas"]["student"]["wrappers"].append({"text": "{core} Hm.", "when": "first"})),
     f"personas.student.wrappers[{N_STUDENT}]: a wrapper mapping has 'text'"),
    (_broken(lambda r: r["personas"]["casual_user"]["wrappers"].append({"text": "Hello, {lc}", "turn": "first"})),
     "the annotated wrapper 'Hello, {lc}' appears 2 times"),
    (_broken(lambda r: r["clarifications"].pop("AGG_SUM_AMBIGUOUS")),
     "clarifications: unknown [] / missing ['AGG_SUM_AMBIGUOUS']"),
])
def test_a_malformed_file_names_the_file_and_the_entry(tmp_path, raw, fragment):
    with pytest.raises(WordingsError) as err:
        _load(tmp_path, raw)
    assert str(tmp_path / "wordings.yaml") in str(err.value)
    assert fragment in str(err.value)


def test_an_unchanged_copy_loads(tmp_path):
    """The broken files above differ from the shipped one by their one edit only."""
    _load(tmp_path, RAW)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(WordingsError, match="cannot read it"):
        load_wordings(tmp_path / "absent.yaml", **KNOWN)


def test_the_file_ships_with_the_package():
    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert "wordings.yaml" in pyproject["tool"]["setuptools"]["package-data"]["benchmark"]
    assert default_path().parent.name == "benchmark" and default_path().is_file()
