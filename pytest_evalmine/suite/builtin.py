"""Built-in suites (spec: "Built-in suites", P7): ``gsm8k-160`` and ``e2e-extract-150``.

Their data is not shipped: it is downloaded on first use from a pinned URL into the evalmine
home and kept only when its sha256 matches, or read from an offline copy named by
``EVALMINE_DATA`` (checked the same way). Each suite is then written as an ordinary suite
file (YAML plus a JSONL of cases, in file order) and collected like any other.
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EvalmineError

DATA_ENV = "EVALMINE_DATA"
DOWNLOAD_TIMEOUT_S = 60


@dataclass(frozen=True)
class DataFile:
    folder: str
    name: str
    url: str
    sha256: str
    licence: str


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
    _verified(data, file, file.url)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{file.name}.")
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)
    os.replace(temporary, target)
    return data


def _verified(data: bytes, file: DataFile, where: str) -> bytes:
    actual = sha256_of(data)
    if actual != file.sha256:
        raise BuiltinSuiteError(
            f"{where}: checksum mismatch (sha256 {actual}, expected {file.sha256}); "
            "nothing was cached"
        )
    return data


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


# --- the suites ------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuiltinSuite:
    name: str
    data: DataFile
    description: str
    build: Callable[[bytes], tuple[dict[str, Any], list[dict[str, Any]]]]


def _gsm8k_suite(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    task = {
        "id": "gsm8k",
        "kind": "answer",
        "prompt": GSM8K_PROMPT,
        "judge": False,
        "checks": ["number"],
        "cases_path": "cases.jsonl",
    }
    return task, gsm8k_cases(data, 160)


def _e2e_suite(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    task = {
        "id": "e2e-extract",
        "kind": "extract",
        "prompt": E2E_PROMPT,
        "schema": e2e_schema(data),
        "judge": False,
        "checks": ["json_fields"],
        "cases_path": "cases.jsonl",
    }
    return task, e2e_cases(data, 150)


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
    task, cases = suite.build(data_bytes(suite.data, home, fetch))
    folder = home / "suites" / name
    folder.mkdir(parents=True, exist_ok=True)
    document = {"version": 1, "suite": name, "description": suite.description, "tasks": [task]}
    _write(folder / "cases.jsonl", "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases))
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
