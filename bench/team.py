"""Several editors on one server: what each user of a team's server feels.

    python bench/team.py [--editors 1,2,4,8] [--launch defaults,np,vllm] [--bursts 6] [--minuet DIR]
    make bench-team BENCH_TEAM_ARGS='--minuet ~/.cache/local-copilot/minuet'

`local-copilot bench` measures the server (its throughput as requests are sent concurrently);
this measures editors: N headless Neovims, each with the plugin, type at once against one
server running the real-shape model (bench/real.py, bench/servers.py). Every round, each editor
moves to its own next place (each follows its own plan of moves through its own copies of two
standard-library modules), the cursor rests 0.6 s, then all type a burst of 8 keys at 90
ms/key at the same moment, each from a timer inside its own Neovim.

Servers: llama-server at its own defaults (4 slots, a unified KV cache) whatever the team's size
("defaults"); with a slot per editor, -np N and N times the context ("np"); vLLM, prefix
caching on ("vllm"). With --minuet, N minuet editors (its README's settings) type the same way
against a fresh server of each kind, after the plugin's.

Per launch and team size: each editor's p50 (the median and the worst editor), p90 over all
bursts, bursts without a suggestion and the plugin's errors, the server's prompt and generated
tokens per burst per editor, and those beyond one editor's alone ("extra": the work that
sharing the server costs, e.g. a window evaluated again in another slot).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as H  # noqa: E402
import real as R  # noqa: E402
import servers as S  # noqa: E402

REST_S = 0.6
LAUNCHES = ("defaults", "np", "vllm")


def team(launch: str, n: int, client: str, args: argparse.Namespace, work: Path, nvim_bin: str,
         manifest: Path, shared: S.BenchServer | None = None) -> dict[str, Any]:
    """N editors of `client` (this checkout or minuet) typing at once against one fresh
    llama-server, or `shared` (vLLM: minutes to start) with its prefix cache emptied."""
    if shared is not None:
        server = shared
        server.reset_cache()
    else:
        extra = ["-np", str(n)] if launch == "np" else []
        ctx = args.ctx * n if launch == "np" else args.ctx  # -c is split across the slots
        server = S.start("defaults", workdir=work, ctx=ctx, shape=args.shape, extra=extra)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sizes = {i: len((stdlib / m).read_text().splitlines()) for i, m in enumerate(R.MODULES)}
    editors: list[R.Variant] = []
    rounds: list[dict[str, float]] = []
    try:
        for e in range(n):
            d = work / f"{launch}-{n}-{client}-{e}"
            d.mkdir()
            files = [d / m for m in R.MODULES]
            for f, m in zip(files, R.MODULES):
                shutil.copy(stdlib / m, f)
            env = H.nvim_env(d, manifest)
            if client == "minuet":
                nvim = R.start_peer(nvim_bin, args.minuet.resolve(), env, server, tuned=False)
            else:
                nvim = R.start_nvim(nvim_bin, H.REPO, manifest, env, server.backend())
            for f in reversed(files):
                nvim.command(f"edit {f}")
            editors.append((R.PeerVariant if client == "minuet" else R.Variant)(f"{client} {e}", REST_S, server,
                                                                                 nvim, files))
        plans = [R.moves(args.bursts + 1, args.seed + e, sizes) for e in range(n)]
        for r in range(args.bursts + 1):
            m0 = server.counters()
            for ed, plan in zip(editors, plans):
                ed.move(plan[r][1], plan[r][2])
            time.sleep(REST_S)  # every user's pause at the new place
            text = R.TEXTS[r % len(R.TEXTS)]
            for ed in editors:
                ed.type(text)
            for ed, plan in zip(editors, plans):
                ed.collect(plan[r][0], plan[r][1], plan[r][2], text)
            d = server.counters().minus(m0)
            if r == 0:  # the first round starts the hosts and fills the caches: not measured
                for ed in editors:
                    ed.samples.clear()
                continue
            rounds.append({"prompt_tokens": d.prompt_tokens, "generated": d.generated})
            lat = [ed.samples[-1]["latency_ms"] for ed in editors]
            H.log(f"[{launch} x{n} {client}] round {r}: " + ", ".join("none" if x is None else f"{x:.0f}" for x in lat)
                  + f" ms; server {d.prompt_tokens:.0f} prompt / {d.generated:.0f} generated tokens")
        per_editor = [[s["latency_ms"] for s in ed.samples if s["latency_ms"] is not None] for ed in editors]
        p50s = [H.pct(x, 50) for x in per_editor if x]
        every = [x for lat in per_editor for x in lat]
        return {
            "launch": launch, "editors": n, "client": client, "argv": server.argv, "slots": S.slots_of(server),
            "p50_median_ms": statistics.median(p50s) if p50s else float("nan"),
            "p50_worst_ms": max(p50s) if p50s else float("nan"),
            "p90_ms": H.pct(every, 90),
            "missing": sum(1 for ed in editors for s in ed.samples if s["latency_ms"] is None),
            "errors": sum(s.get("errors", 0) for ed in editors for s in ed.samples),
            "bursts": sum(len(ed.samples) for ed in editors),
            "prompt_tokens_per_burst": statistics.fmean(x["prompt_tokens"] for x in rounds) / n,
            "generated_per_burst": statistics.fmean(x["generated"] for x in rounds) / n,
            "samples": [ed.samples for ed in editors],
        }
    finally:
        for ed in editors:
            with contextlib.suppress(Exception):
                ed.nvim.close()
        if shared is None:
            server.stop()


def table(results: list[dict[str, Any]]) -> str:
    one = {(r["launch"], r["client"]): r for r in results if r["editors"] == 1}
    head = ["server", "editors", "client", "p50 (median editor)", "p50 (worst editor)", "p90", "no suggestion",
            "errors", "prompt tokens / burst / editor", "generated / burst / editor", "extra vs one editor",
            "p50 / one editor's"]
    rows = []
    for r in results:
        base = one.get((r["launch"], r["client"]))
        extra = ratio = "-"
        if base and r["editors"] > 1:
            more = (r["prompt_tokens_per_burst"] + r["generated_per_burst"]
                    - base["prompt_tokens_per_burst"] - base["generated_per_burst"])
            extra = f"{more:+.0f} tokens"
            ratio = f"{r['p50_median_ms'] / base['p50_median_ms']:.1f} x"
        slots = f" ({r['slots']} slots)" if r.get("slots") else ""
        rows.append([f"{r['launch']}{slots}", str(r["editors"]), r["client"], f"{r['p50_median_ms']:.0f} ms",
                     f"{r['p50_worst_ms']:.0f} ms", f"{r['p90_ms']:.0f} ms", f"{r['missing']} of {r['bursts']}",
                     str(r["errors"]), f"{r['prompt_tokens_per_burst']:.0f}", f"{r['generated_per_burst']:.0f}", extra,
                     ratio])
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--editors", default="1,2,4,8", help="comma-separated team sizes (1 is the baseline)")
    ap.add_argument("--launch", default="defaults,np,vllm", help=f"comma-separated: {', '.join(LAUNCHES)}")
    ap.add_argument("--bursts", type=int, default=6, help="measured rounds per team")
    ap.add_argument("--minuet", type=Path, default=None, help="a minuet-ai.nvim checkout, measured after the plugin")
    ap.add_argument("--minuet-editors", default="1,4", help="team sizes minuet is measured at (its bursts take seconds)")
    ap.add_argument("--shape", default="qwen2.5-coder-0.5b")
    ap.add_argument("--ctx", type=int, default=8192, help="tokens per editor")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.editors.split(",") if x]
    launches = [x for x in args.launch.split(",") if x]
    minuet_sizes = [n for n in (int(x) for x in args.minuet_editors.split(",") if x) if n in sizes]
    if bad := [x for x in launches if x not in LAUNCHES]:
        raise SystemExit(f"unknown --launch {bad}: one of {', '.join(LAUNCHES)}")
    clients = ["this"]
    if args.minuet:
        if not (args.minuet / "lua" / "minuet").is_dir():
            raise SystemExit(f"--minuet {args.minuet}: not a minuet-ai.nvim checkout (no lua/minuet)")
        clients.append("minuet")
    else:
        H.log("no --minuet checkout given: measuring the plugin alone")
    nvim_bin = H.nvim_binary()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lc-bench-team-") as tmp:
        work = Path(tmp)
        manifest = R.register(nvim_bin, H.REPO, work / "rplugin.vim")
        for launch in launches:
            shared = S.start("vllm", workdir=work, ctx=args.ctx, shape=args.shape) if launch == "vllm" else None
            try:
                for client in clients:
                    for n in (sizes if client == "this" else minuet_sizes):
                        results.append(team(launch, n, client, args, work, nvim_bin, manifest, shared))
            finally:
                if shared is not None:
                    shared.stop()
    print(table(results))
    out = args.out or R.RESULTS / f"team-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "shape": args.shape, "results": results},
                              indent=1, default=str))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
