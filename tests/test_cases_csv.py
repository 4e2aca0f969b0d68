"""Cases from a CSV file (spec: "Suite file", CSV cases): the header names the columns, rows
are cases in file order, and every way a table can be wrong is one line naming the file and
the line its row starts on."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from pytest_evalmine.commands.cli import main
from pytest_evalmine.errors import SuiteError
from pytest_evalmine.scoring.checkers import BUILTIN
from pytest_evalmine.scoring.item import score_answer, validate_checks
from pytest_evalmine.suite.loader import NO_GOLD, Suite, load_suite
from pytest_evalmine.suite.reading import MAX_STRING_CHARS

from .test_suite_loader import FAKE_KEYS, base_suite, dump_suite, expect_error, write_jsonl

QUOTE_HINT = '(a value holding a comma or a line break is written in double quotes: "a, b")'


def csv_suite(tmp_path: Path, table: str | bytes, **task: Any) -> Path:
    """A suite whose first task (prompt ``Greet {{ customer }} about {{ topic }}.``) reads its
    cases from ``cases.csv`` holding ``table`` (text is written as UTF-8, bytes as they are)."""
    document = base_suite()
    first = document["tasks"][0]
    del first["cases"]
    first["cases_path"] = "cases.csv"
    first.update(task)
    del document["labels"]
    target = tmp_path / "cases.csv"
    if isinstance(table, bytes):
        target.write_bytes(table)
    else:
        target.write_bytes(table.encode("utf-8"))
    return dump_suite(tmp_path, document)


def load_csv(tmp_path: Path, table: str | bytes, **task: Any) -> Suite:
    return load_suite(csv_suite(tmp_path, table, **task))


def csv_error(tmp_path: Path, table: str | bytes, where: str, problem: str) -> SuiteError:
    """The load fails with ``problem`` first, at ``where`` in cases.csv."""
    return expect_error(csv_suite(tmp_path, table), where, problem, file=tmp_path / "cases.csv")


def problems_of(tmp_path: Path, table: str | bytes) -> list[tuple[str, str]]:
    with pytest.raises(SuiteError) as info:
        load_csv(tmp_path, table)
    return [(where, problem) for _, where, problem in info.value.problems]


def raw_cases(suite: Suite) -> list[dict[str, Any]]:
    return suite.document["tasks"][0]["cases"]


# ---------------------------------------------------------------- reading


def test_rows_are_cases_in_file_order_with_vars_and_gold(tmp_path: Path) -> None:
    table = "id,customer,topic,gold\nzeta,Ada,billing,42\nalpha,Bo,labels,7\nmid,Cy,refunds,\n"
    suite = load_csv(tmp_path, table)
    cases = suite.task("greet").cases
    assert [case.id for case in cases] == ["zeta", "alpha", "mid"]
    assert cases[0].vars == {"customer": "Ada", "topic": "billing"}
    assert [case.gold for case in cases] == ["42", "7", NO_GOLD]  # an empty cell: no gold
    assert suite.render(suite.task("greet"), cases[1]).prompt == "Greet Bo about labels."


def test_a_csv_file_hashes_as_the_jsonl_file_it_converts_to(tmp_path: Path) -> None:
    table = "id,customer,topic,gold\nfirst,Ada,billing,42\nsecond,Bo,,\n"
    (tmp_path / "csv").mkdir()
    from_csv = load_csv(tmp_path / "csv", table)
    rows = [
        {"id": "first", "vars": {"customer": "Ada", "topic": "billing"}, "gold": "42"},
        {"id": "second", "vars": {"customer": "Bo", "topic": ""}},
    ]
    document = base_suite()
    document["tasks"][0]["cases_path"] = "cases.jsonl"
    del document["tasks"][0]["cases"], document["labels"]
    (tmp_path / "jsonl").mkdir()
    write_jsonl(tmp_path / "jsonl" / "cases.jsonl", rows)
    from_jsonl = load_suite(dump_suite(tmp_path / "jsonl", document))
    assert raw_cases(from_csv) == rows
    assert from_csv.hash == from_jsonl.hash


def test_values_are_text_as_written(tmp_path: Path) -> None:
    # CSV has no types: nothing is reparsed as a number, a boolean, null or JSON.
    table = "id,customer,topic,gold,expected.json_path\nfirst,007,true,1e3,null\nsecond,[1],{},x,\n"
    suite = load_csv(tmp_path, table)
    first, second = suite.task("greet").cases
    assert (first.vars, first.gold, first.expected) == (
        {"customer": "007", "topic": "true"},
        "1e3",
        {"json_path": "null"},
    )
    assert second.vars == {"customer": "[1]", "topic": "{}"}


def test_bom_crlf_and_quoted_cells_spanning_lines(tmp_path: Path) -> None:
    table = '\ufeffid,customer,topic\r\nfirst,"Ada, Jr.","two\r\nlines"\r\nsecond,"say ""hi""",\r\n'
    cases = load_csv(tmp_path, table).task("greet").cases
    assert [case.id for case in cases] == ["first", "second"]  # not '\ufeffid' as a column
    assert cases[0].vars == {"customer": "Ada, Jr.", "topic": "two\r\nlines"}
    assert cases[1].vars == {"customer": 'say "hi"', "topic": ""}


def test_blank_lines_and_empty_rows_are_skipped(tmp_path: Path) -> None:
    table = "\nid,customer,topic\n\nfirst,Ada,x\n,,\n  ,\t,\nsecond,Bo,y\n\n"
    assert [case.id for case in load_csv(tmp_path, table).task("greet").cases] == [
        "first",
        "second",
    ]


def test_expected_is_the_gold_column_under_another_name(tmp_path: Path) -> None:
    table = "id,customer,topic,expected\nfirst,Ada,x,Paris\n"
    case = load_csv(tmp_path, table).task("greet").cases[0]
    assert (case.gold, case.expected) == ("Paris", {})


def test_expected_dot_check_columns_give_a_check_its_own_value(tmp_path: Path) -> None:
    table = "id,customer,topic,gold,expected.number\nfirst,Ada,x,Paris,42\nsecond,Bo,y,Rome,\n"
    suite = load_csv(tmp_path, table)
    first, second = suite.task("greet").cases
    assert (first.gold, first.expected) == ("Paris", {"number": "42"})
    assert (second.gold, second.expected) == ("Rome", {})
    assert "expected" not in raw_cases(suite)[1]


def test_header_only_and_empty_files_hold_no_cases(tmp_path: Path) -> None:
    for table in ("id,customer,topic\n", "", "\n\n"):
        expect_error(
            csv_suite(tmp_path, table), "$.tasks[0].cases_path", "cases.csv holds no cases"
        )


def test_upper_case_suffix_is_csv_too(tmp_path: Path) -> None:
    document = base_suite()
    document["tasks"][0]["cases_path"] = "CASES.CSV"
    del document["tasks"][0]["cases"], document["labels"]
    (tmp_path / "CASES.CSV").write_text("id,customer,topic\nfirst,Ada,x\n", "utf-8")
    assert [c.id for c in load_suite(dump_suite(tmp_path, document)).task("greet").cases] == [
        "first"
    ]


def test_the_module_wide_field_limit_is_restored(tmp_path: Path) -> None:
    before = csv.field_size_limit()
    load_csv(tmp_path, "id,customer,topic\nfirst,Ada," + "x" * 200_000 + "\n")
    assert csv.field_size_limit() == before


# ---------------------------------------------------------------- a broken header


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("id,customer,topic,customer", "column 'customer' is named twice (columns 2 and 4)"),
        ("id,customer,,topic", "column 3 of the header has no name"),
        ("customer,topic", "the header row has no 'id' column"),
        ("id,customer,topic,gold,expected", "columns 'gold' and 'expected' are one value"),
        ("id;customer;topic", "the header row is one column, 'id;customer;topic': columns are"),
        ("id,customer,topic,first name", "column 'first name' is not a variable name"),
        ("id,customer,topic,2nd", "column '2nd' is not a variable name"),
        ("id,customer, topic", "column ' topic' has spaces around its name"),
        ("ID,customer,topic", "column 'ID': names are case-sensitive; write 'id'"),
        ("id,customer,topic,Gold", "column 'Gold': names are case-sensitive; write 'gold'"),
        ("id,customer,topic,expected.", "column 'expected.': '' is not a check name"),
        ("id,customer,topic,expected.1x", "column 'expected.1x': '1x' is not a check name"),
    ],
)
def test_a_broken_header_is_one_line_at_line_1(tmp_path: Path, header: str, problem: str) -> None:
    found = problems_of(tmp_path, f"{header}\nfirst,Ada,x,y,z\n")
    assert found == [("line 1", found[0][1])]
    assert found[0][1].startswith(problem)


def test_every_problem_of_a_header_is_listed(tmp_path: Path) -> None:
    found = problems_of(tmp_path, "customer,,customer\n")
    assert sorted(problem for _, problem in found) == [
        "column 'customer' is named twice (columns 1 and 3)",
        "column 2 of the header has no name",
        "the header row has no 'id' column",
    ]
    assert {where for where, _ in found} == {"line 1"}


def test_header_after_blank_lines_is_named_at_its_own_line(tmp_path: Path) -> None:
    csv_error(tmp_path, "\n\ncustomer,topic\n", "line 3", "the header row has no 'id' column")


# ---------------------------------------------------------------- broken rows


def test_rows_of_the_wrong_width_are_named_at_the_line_they_start(tmp_path: Path) -> None:
    table = (
        "id,customer,topic\n"  # line 1
        'first,"Ada\nLovelace\nKing",x\n'  # lines 2-4: one row
        "second,Bo\n"  # line 5: too few
        "third,Cy,z,extra\n"  # line 6: too many
        + "".join(f"c{n},A,t\n" for n in range(7, 10))  # lines 7-9
        + "tenth,1,2,3\n"  # line 10
    )
    assert problems_of(tmp_path, table) == [
        ("line 5", "2 cells, the header has 3 columns " + QUOTE_HINT),
        ("line 6", "4 cells, the header has 3 columns " + QUOTE_HINT),
        ("line 10", "4 cells, the header has 3 columns " + QUOTE_HINT),
    ]


def test_a_quote_never_closed_is_named_at_the_row_it_opens(tmp_path: Path) -> None:
    table = 'id,customer,topic\nfirst,Ada,x\nsecond,"Bo,y\nthird,Cy,z\n'
    csv_error(tmp_path, table, "line 3", "a quoted cell opened in this row is never closed")


def test_a_stray_quote_is_not_guessed_around(tmp_path: Path) -> None:
    table = 'id,customer,topic\nfirst,"Ada"Jr,x\n'
    err = csv_error(tmp_path, table, "line 2", "not valid CSV: ',' expected after '\"'")
    assert 'written twice: ""' in err.problem


def test_invalid_utf8_names_its_line_and_byte(tmp_path: Path) -> None:
    table = b"id,customer,topic\nfirst,Ada,x\nsecond,B\xffo,y\n"
    csv_error(tmp_path, table, "line 3", f"not UTF-8 text (byte {table.index(0xFF)})")


def test_invalid_utf8_after_a_bom_counts_the_bom(tmp_path: Path) -> None:
    table = b"\xef\xbb\xbfid,customer,topic\n\xc3(,Ada,x\n"
    csv_error(tmp_path, table, "line 2", "not UTF-8 text (byte 21)")


def test_a_row_of_one_cell_says_cell(tmp_path: Path) -> None:
    csv_error(tmp_path, "id,customer,topic\nfirst\n", "line 2", "1 cell, the header has 3 columns")


def test_a_cell_at_the_string_limit_is_read(tmp_path: Path) -> None:
    table = "id,customer,topic\nfirst,Ada," + "x" * MAX_STRING_CHARS + "\n"
    assert len(load_csv(tmp_path, table).task("greet").cases[0].vars["topic"]) == MAX_STRING_CHARS


def test_a_cell_over_the_string_limit_is_refused(tmp_path: Path) -> None:
    table = "id,customer,topic\nfirst,Ada,x\nsecond," + "x" * (MAX_STRING_CHARS + 1) + ",y\n"
    err = csv_error(tmp_path, table, "line 3", f"a cell longer than {MAX_STRING_CHARS} characters")
    assert len(str(err)) < 200


# ---------------------------------------------------------------- the loader's own checks


def test_duplicate_ids_are_named_at_their_line(tmp_path: Path) -> None:
    csv_error(
        tmp_path,
        "id,customer,topic\nfirst,Ada,x\nsecond,Bo,y\nfirst,Cy,z\n",
        "line 4",
        "duplicate case id 'first' in task 'greet'",
    )


def test_a_placeholder_without_a_column_is_named_at_each_row(tmp_path: Path) -> None:
    found = problems_of(tmp_path, "id,customer\nfirst,Ada\nsecond,Bo\n")
    assert [where for where, _ in found] == ["line 2", "line 3"]
    assert "placeholder {{ topic }} in the prompt has no variable 'topic'" in found[0][1]


def test_an_id_that_is_not_an_identifier_is_refused_by_the_schema(tmp_path: Path) -> None:
    csv_error(tmp_path, "id,customer,topic\n-first,Ada,x\n", "line 2.id", "'-first'")


@pytest.mark.parametrize("cell", ["value", "header"])
def test_an_api_key_is_refused_without_echo(tmp_path: Path, cell: str) -> None:
    provider, key = FAKE_KEYS["openai-project"]
    if cell == "value":
        table, where = f"id,customer,topic\nfirst,Ada,x\nsecond,{key},y\n", "line 3.vars.customer"
    else:
        table, where = f"id,customer,topic,{key}\nfirst,Ada,x,y\n", "line 1"
    err = csv_error(tmp_path, table, where, f"looks like an API key ({provider} format)")
    assert key not in str(err) and key[-12:] not in str(err)


# ---------------------------------------------------------------- checks and the command line


def test_a_number_check_reads_a_text_gold(tmp_path: Path) -> None:
    suite = load_csv(
        tmp_path,
        'id,customer,topic,gold\nfirst,Ada,x,"70,000"\nsecond,Bo,y,$18\n',
        checks=["number"],
    )
    validate_checks(suite, BUILTIN, "suite.eval.yaml")
    task = suite.task("greet")
    first, second = (
        score_answer(answer, None, task.checks, case, BUILTIN).status("number")
        for answer, case in zip(["It is 70000.", "About 19 dollars."], task.cases, strict=True)
    )
    assert (first, second) == (True, False)


def test_a_check_needing_gold_names_the_empty_cells(tmp_path: Path) -> None:
    suite = load_csv(
        tmp_path, "id,customer,topic,gold\nfirst,Ada,x,1\nsecond,Bo,y,\n", checks=["number"]
    )
    with pytest.raises(SuiteError, match="check 'number' needs a value to compare with"):
        validate_checks(suite, BUILTIN, "suite.eval.yaml")


def test_evalmine_validate_reads_a_csv_suite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    csv_suite(tmp_path, "id,customer,topic,gold\nfirst,Ada,x,1\nsecond,Bo,y,2\n", checks=["number"])
    code = main(["validate", "--rootdir", str(tmp_path), "suite.eval.yaml"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert out.startswith("ok suite.eval.yaml: suite unit, 6 items")  # (2 + 1 cases) x 2 models

    (tmp_path / "cases.csv").write_text("id,customer,topic\nfirst,Ada\n", "utf-8")
    code = main(["validate", "--rootdir", str(tmp_path), "suite.eval.yaml"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines() == [
        "cases.csv: line 2: 2 cells, the header has 3 columns " + QUOTE_HINT
    ]
