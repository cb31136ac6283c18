"""The command line as a user runs it: exit codes, JSON contract, SARIF, one-line errors."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
IR = ROOT / "examples" / "ir"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verify_agent", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_check_verified_exits_0_and_says_so():
    done = run("check", str(IR / "megatron_mlp_ok.vir"))
    assert done.returncode == 0
    assert "VERIFIED" in done.stdout


def test_check_violation_exits_1_with_line_hint_and_counterexample():
    done = run("check", str(IR / "megatron_mlp_missing_allreduce.vir"))
    assert done.returncode == 1
    assert "megatron_mlp_missing_allreduce.vir:12" in done.stdout
    assert "all_reduce(op=sum) over tp after this line" in done.stdout
    assert "single device computes" in done.stdout


def test_json_output_follows_the_contract():
    done = run("check", str(IR / "double_allreduce.vir"), "--format", "json")
    body = json.loads(done.stdout)
    assert done.returncode == 1
    assert set(body) >= {"verdict", "file", "mesh", "diagnostics", "fixes", "stats"}
    assert body["verdict"] == "violations" and body["mesh"] == {"tp": 2}
    first = body["diagnostics"][0]
    assert set(first) >= {"check", "severity", "line", "message", "counterexample"}
    assert first["line"] == 12 and first["counterexample"]["confirmed_by_evaluation"] is True
    assert isinstance(body["stats"]["ops"], int) and isinstance(body["stats"]["seconds"], float)


def test_sarif_output_locates_findings():
    done = run("check", str(IR / "gelu_on_partial_sum.vir"), "--format", "sarif")
    sarif = json.loads(done.stdout)
    assert sarif["version"] == "2.1.0"
    result = sarif["runs"][0]["results"][0]
    assert result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 11


def test_parse_error_is_one_line_with_exit_2(tmp_path):
    bad = tmp_path / "bad.vir"
    bad.write_text("mesh tp=2\ny = matmul(x w)\n")
    done = run("check", str(bad))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "bad.vir:2:14: expected ',' or ')'" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_file_and_missing_argument_are_usage_errors(tmp_path):
    assert run("check", str(tmp_path / "nope.vir")).returncode == 2
    assert run("check").returncode == 2


def test_inconclusive_programs_exit_3(tmp_path):
    # exp(a) * exp(b) == exp(a + b) holds, but exp is an uninterpreted function to the solver
    # and the parallel program relies on that identity: honest answer is "inconclusive".
    program = tmp_path / "exp.vir"
    program.write_text(
        "mesh tp=2\n"
        "input x: f32[2, 2] {tp: P(sum)}\n"
        "e = exp(x) at 1\n"
        "p = all_reduce(e, mesh_dim=tp, op=sum) at 2\n"
        "output p {tp: R}\n")
    done = run("check", str(program), "--format", "json")
    body = json.loads(done.stdout)
    assert body["verdict"] in ("violations", "unsupported")
    assert done.returncode == {"violations": 1, "unsupported": 3}[body["verdict"]]


def test_github_format_prints_annotations():
    done = run("check", str(IR / "gelu_on_partial_sum.vir"), "--format", "github")
    assert done.returncode == 1
    assert done.stdout.startswith("::error file=")
    assert ",line=11," in done.stdout


def test_check_reads_the_json_form(tmp_path):
    from agent.ir_json import program_to_json
    from verifier.text_format import parse_program

    program = parse_program((IR / "double_allreduce.vir").read_text())
    path = tmp_path / "double.json"
    path.write_text(json.dumps(program_to_json(program)))
    done = run("check", str(path), "--format", "json")
    assert done.returncode == 1 and json.loads(done.stdout)["verdict"] == "violations"
    (tmp_path / "bad.json").write_text('{"mesh": 3}')
    bad = run("check", str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "expected IR JSON matching the schema" in bad.stderr


def test_fix_shows_a_verified_patch_and_write_applies_it(tmp_path):
    """The static reader's repair (--no-exec); traced repair has its twin tests in tests/repair."""
    target = tmp_path / "mlp.py"
    target.write_text((ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py").read_text())
    shown = run("fix", str(target), "--no-exec")
    assert shown.returncode == 1
    assert "+    dist.all_reduce(y)" in shown.stdout
    written = run("fix", str(target), "--write", "--no-exec")
    assert written.returncode == 0 and "VERIFIED" in written.stdout
    assert "dist.all_reduce(y)" in target.read_text()


def test_review_writes_suggestions_for_changed_files(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    source = (ROOT / "examples" / "models" / "dist_tp_mlp_ok.py").read_text()
    (repo / "mlp.py").write_text(source)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    buggy = (ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py").read_text()
    (repo / "mlp.py").write_text(buggy)
    done = run("review", "--base", "HEAD", "--repo", str(repo), "--review-json", str(tmp_path / "r.json"),
               "--sarif", str(tmp_path / "r.sarif"), "--no-exec")
    assert done.returncode == 1, done.stderr
    body = json.loads((tmp_path / "r.json").read_text())
    assert body["event"] == "COMMENT" and body["comments"]
    assert "```suggestion" in body["comments"][0]["body"]
    assert json.loads((tmp_path / "r.sarif").read_text())["version"] == "2.1.0"


def test_a_program_without_outputs_is_not_verified(tmp_path):
    program = tmp_path / "none.vir"
    program.write_text("mesh tp=2\ninput x: f32[2] {tp: R}\ny = neg(x) at 1\n")
    done = run("check", str(program))
    assert done.returncode == 3
    assert "nothing to compare" in done.stdout


def test_malformed_placements_and_gradients_are_reported_not_crashed(tmp_path):
    cases = {
        "input x: f32[2] {tp: V}\ny = neg(x) at 1\noutput y {tp: R}\n": (1, "rank-varying (V)"),
        "input x: f32[2] {tp: P(max)}\ny = neg(x) at 1\noutput y {tp: R}\n": (3, "only sum and avg partial"),
        "input x: f32[2] {tp: R}\ny = neg(x) at 1\noutput y {tp: V}\n": (1, "no global value to compare"),
        "input x: f32[2] {tp: R}\ny = neg(x) at 1\noutput y {tp: R}\ngrad q at 3\n": (1, "names no input"),
    }
    for index, (body, (code, message)) in enumerate(cases.items()):
        path = tmp_path / f"case{index}.vir"
        path.write_text("mesh tp=2\n" + body)
        done = run("check", str(path))
        assert done.returncode == code and message in done.stdout, (body, done.stdout, done.stderr)
