"""The `arl` command."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
import time
from pathlib import Path


def cmd_models(args) -> int:
    from . import models

    rows = models.list_models()
    print(f"{'name':40} {'kind':6} {'params':>10}  available")
    for m in rows:
        params = f"{m.params / 1e6:.2f}M" if m.params else "-"
        print(f"{m.name:40} {m.kind:6} {params:>10}  {'yes' if m.available else 'no: ' + m.how_to_get}")
    print("\nAny local Hugging Face model folder (a path with config.json) works as base_model too.")
    return 0


def cmd_demo(args) -> int:
    """Sample, train a few supervised steps on one answer, sample again, and show what changed."""
    import arl
    from tqdm import tqdm

    from .models.zoo import check_name
    from .rollout import sft_datum

    if args.steps < 1 or not args.lr > 0:
        raise ValueError(f"--steps {args.steps} --lr {args.lr}: steps must be at least 1 and lr greater than 0")
    check_name(args.model)

    service = arl.ServiceClient(run_name="demo")
    client = service.create_full_training_client(args.model, seed=0)
    tok = client.get_tokenizer()
    question, answer = "What is 2 + 3?", "\\boxed{5}"
    prompt = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                     tokenize=True,
                                     return_dict=False)
    target = tok.encode(answer, add_special_tokens=False) + [tok.eos_token_id]
    datum = sft_datum(prompt, target)
    params = arl.SamplingParams(max_tokens=12, seed=0, temperature=1.0)

    def show(title):
        sampler = client.save_weights_and_get_sampling_client()
        res = sampler.sample(arl.ModelInput.from_ints(prompt), 4, params).result()
        logp = client.forward([datum], "cross_entropy").result().metrics["loss:sum"]
        print(f"\n{title}: logp(answer) = {-logp:.3f}")
        for s in res.sequences:
            print(f"  {s.text!r}  [{s.stop_reason}]")
        return -logp

    print(f"model {args.model}; prompt: {question!r}; training target: {answer!r}")
    before = show("before training")
    t0 = time.perf_counter()
    for _ in tqdm(range(args.steps), desc="training", unit="step"):
        client.forward_backward([datum], "cross_entropy")
        client.optim_step(arl.AdamParams(learning_rate=args.lr)).result()
    elapsed = time.perf_counter() - t0
    after = show(f"after {args.steps} steps ({elapsed:.1f}s)")
    print(f"\nlogp(answer): {before:.3f} -> {after:.3f}; p(answer) x{2.718281828 ** (after - before):.3g}")
    print("usage:", client.get_usage())
    return 0


def cmd_list(args) -> int:
    from .recipes import CHAPTERS

    for name, (_, description) in CHAPTERS.items():
        print(f"{name:16} {description}")
    return 0


def resolver(recipe):
    """`resolve(preset, overrides) -> Config` of a chapter: its presets, the overrides, every field's
    checks, and the names a run would load (models, the tracker) checked without building anything."""
    from . import config

    def resolve(preset: str, overrides) -> object:
        cfg = config.resolve(recipe.Config, recipe.PRESETS, preset, overrides)
        check_names(cfg)
        return cfg

    return resolve


def check_names(cfg) -> None:
    """`model` / `teacher_model` name a model (`arl models`; on a remote backend, whatever the service
    has) and `tracker` a tracker."""
    from .models.zoo import check_name
    from .track.trackers import check_kind

    for name in ("model", "teacher_model"):
        if getattr(cfg, name, None) is not None and getattr(cfg, "backend", "local") == "local":
            try:
                check_name(getattr(cfg, name))
            except ValueError as e:
                raise ValueError(f"{name}={getattr(cfg, name)!r}: {e}") from None
    if hasattr(cfg, "tracker"):
        check_kind(cfg.tracker)


def cmd_path(args) -> int:
    from pathlib import Path

    from .path import path_text, questions_text
    from .recipes import CHAPTERS

    print(questions_text() if args.questions else path_text(CHAPTERS, Path(args.runs)))
    return 0


def cmd_run(args) -> int:
    """Resolve the config (failing before any work on a bad key or value), then run the chapter."""
    from dataclasses import asdict

    from . import config
    from .recipes import check_needs, load
    from .track import RunDir

    if not args.help_config:
        check_needs(args.chapter)  # a missing extra: one line naming it, before the run folder exists
    recipe = load(args.chapter)
    if args.help_config:
        print(recipe.__doc__.strip(), "\n")
        print(f"presets: {', '.join(recipe.PRESETS)}\n")
        print(config.help_text(recipe.Config, recipe.PRESETS))
        return 0
    if args.resume:
        run, cfg = _resumed(args, recipe)
        print(f"resuming {run.path}")
    else:
        cfg = resolver(recipe)(args.preset or "mini", args.overrides)
        RunDir.check_new(args.out or "runs", args.chapter, args.name)
        run = RunDir.create(args.out or "runs", args.chapter, args.name, asdict(cfg))
        print(f"run folder: {run.path}")
    recipe.main(cfg, run, resume=bool(args.resume))
    from .audit import add_to_report

    add_to_report(run, recipe)  # the four questions, answered from the finished run's own data
    print(f"report: {run.report_file}")
    return 0


def _resumed(args, recipe):
    """The run folder (locked) and config of `arl run CHAPTER --resume RUN`: the run as it was configured.
    A run of another chapter, a change of setting, or a new name/preset/out is refused before anything
    in the folder changes."""
    from dataclasses import asdict

    from . import config
    from .track import RunDir

    for flag, value in (("--name", args.name), ("--preset", args.preset), ("--out", args.out)):
        if value is not None:
            raise ValueError(f"{flag} does not go with --resume: a resumed run keeps its folder and settings; "
                             f"drop {flag}, or start a new run without --resume")
    run = RunDir.open(args.resume)
    if run.chapter != args.chapter:
        raise ValueError(f"{run.path} is a {run.chapter} run, not {args.chapter}; resume it with "
                         f"`arl run {run.chapter} --resume {args.resume}`")
    fields = set(recipe.Config.__dataclass_fields__)
    unread = sorted(set(run.config) - fields)
    if unread:  # a run started before the chapter stopped listing fields it never read
        print(f"resuming: {args.chapter} no longer has {', '.join(unread)} (it never read them); ignored", file=sys.stderr)
    stored = {k: v for k, v in run.config.items() if k in fields}
    cfg = config.resolve(recipe.Config, {"resumed": stored}, "resumed", args.overrides)
    check_names(cfg)
    changed = [f"{k}={v!r} (the run has {stored.get(k)!r})" for k, v in asdict(cfg).items() if k in stored and stored[k] != v]
    if changed:
        raise ValueError(f"--resume continues a run with the settings it started with; {', '.join(changed)}: "
                         f"start a new run to change them")
    return run.lock(), cfg


def cmd_compare(args) -> int:
    """Plan the arms (failing before any run on a bad key or value), run what is unfinished, report."""
    from . import config
    from .recipes import check_needs, load
    from .report.compare import EQUAL_COMPUTE, equal_compute_arms, write_compare_report
    from .track.compare import PLAN_FILE, Plan, parse_vary, run_all

    if not args.report_only:
        check_needs(args.chapter)
    recipe = load(args.chapter)
    for flag, value in (("--seeds", args.seeds), ("--jobs", args.jobs), ("--threads", args.threads)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} {value}: must be at least 1")
    resolve = resolver(recipe)
    if not args.vary and args.out and (Path(args.out) / PLAN_FILE).is_file():  # resume it, or --report-only
        plan = Plan.open(args.out, resolve)
        if plan.chapter != args.chapter:
            raise ValueError(f"{args.out} compares {plan.chapter}, not {args.chapter}")
    else:
        arms = parse_vary(args.vary or [])
        base = dict(config.split_override(item) for item in args.set)
        out = args.out or f"runs/compare/{args.chapter}-{'-'.join(dict.fromkeys(a.name.split('=')[0] for a in arms))}"
        if args.start_per_seed and "start_seed" not in recipe.Config.__dataclass_fields__:
            raise ValueError(f"--start-per-seed: the {args.chapter} chapter has no cold start to train per seed "
                             "(no start_seed field); leave the flag out")
        plan = Plan.create(out, args.chapter, args.preset, base, arms, list(range(args.seeds)), resolve,
                           ["start_seed"] if args.start_per_seed else [])
    n_arms, n_seeds = len(plan.arms), len(plan.seeds)
    print(f"comparison folder: {plan.folder} ({n_arms} arm{'s' * (n_arms != 1)} x {n_seeds} seed{'s' * (n_seeds != 1)})")
    failures = [] if args.report_only else run_all(plan, args.jobs, args.threads)
    if args.equal_compute and not args.report_only and not failures:
        known = {a.name for a in plan.arms}
        extra = [a for a in equal_compute_arms(plan, args.equal_compute) if a.name not in known]
        for arm in extra:
            print(f"equal compute: {arm.name} runs steps={arm.overrides['steps']} to match its partner's "
                  f"{EQUAL_COMPUTE[args.equal_compute]}")
        if extra:
            plan.arms += extra
            plan.check()
            plan.save()
            failures = run_all(plan, args.jobs, args.threads)
    report = write_compare_report(plan, getattr(recipe, "same_update", None))
    print(f"report: {report}")
    for failure in failures:
        print(f"failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


def cmd_decide(args) -> int:
    """Read every question of a record in one forward pass and print each one's distribution."""
    from .data.decisions import load_record
    from .decide import decide, load_decider

    try:
        record = load_record(args.record)
        sampler, tokenizer, temperature = load_decider(args.checkpoint, args.temperature)
    except (ValueError, FileNotFoundError) as e:
        print(f"arl decide: {e}", file=sys.stderr)
        return 2
    (decisions,) = decide(sampler, tokenizer, [record], temperature, args.topk)
    print(f"{record.state}\n(T = {temperature:.3g}, one forward pass, {len(decisions)} questions)")
    for d in decisions:
        print("  " + d.describe())
    return 0


def cmd_audit(args) -> int:
    """Answer the four questions for a run folder from its own data."""
    from .audit import audit
    from .recipes import load
    from .track import RunDir
    from .track.rundir import NotARunError

    try:
        run = RunDir.open(args.run)
        baseline = RunDir.open(args.baseline) if args.baseline else None
    except (NotARunError, FileNotFoundError) as e:
        print(f"arl audit: {e}", file=sys.stderr)
        return 2
    print(audit(run, load(run.chapter), baseline).markdown(run))
    return 0


def cmd_show(args) -> int:
    """Write the token-level HTML page of a run's multi-turn trajectories."""
    from .report.trajectories import write_trajectories
    from .track.rundir import NotARunError

    try:
        path = write_trajectories(args.run, args.step, args.eval, args.limit, args.out, args.group)
    except (NotARunError, FileNotFoundError, ValueError) as e:
        print(f"arl show: {e}", file=sys.stderr)
        return 2
    print(f"trajectories: {path}")
    return 0


def cmd_export(args) -> int:
    """Write a run's newest checkpoint (or a named one) as a standard Hugging Face folder."""
    from .export import export

    e = export(args.source, args.out_dir, merge=args.merge, force=args.force)
    what = {"full": "full fine-tune", "merged": "LoRA merged into its base", "adapter": "LoRA adapter (peft)"}[e.form]
    print(f"exported {e.checkpoint} ({what} of {e.base_model}) to {e.folder}; its README.md says how to load it")
    return 0


def cmd_serve(args) -> int:
    """The Tinker REST API over the local engine (docs/serve.md)."""
    from . import settings

    try:
        from . import serve
    except ImportError as e:
        raise RuntimeError(f"arl serve needs the serve extra ({e}); install it with: pip install 'agentic-rl-lab[serve]'") from None
    if args.home:
        settings.configure(home=Path(args.home).expanduser().resolve())
    api_key = args.api_key or os.environ.get("ARL_SERVE_API_KEY")
    from .serve.openai_api import parse_model_specs

    try:
        openai_models = parse_model_specs(args.model)
    except ValueError as e:
        print(f"arl serve: {e}", file=sys.stderr)
        return 2
    print(f"arl serve: http://{args.host}:{args.port} (home {settings.get().home}); point the SDK at it with "
          f"TINKER_BASE_URL=http://{args.host}:{args.port} TINKER_API_KEY={'<your --api-key>' if api_key else 'tml-local'}",
          flush=True)
    serve.run(args.host, args.port, api_key, access_log=not args.quiet, openai_models=openai_models)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="arl", description="Agentic RL Lab: RL for LLMs and agents on a laptop CPU.")
    parser.add_argument("--threads", type=int, help="torch threads (default: ARL_NUM_THREADS or min(2, cores))")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("models", help="list the models the local engine can load")
    p.set_defaults(fn=cmd_models)
    p = sub.add_parser("list", help="list the chapters")
    p.set_defaults(fn=cmd_list)
    p = sub.add_parser("path", help="the learning path: four stops, their chapters and key questions, and which "
                       "chapters have runs here (--questions: enter through a question)")
    p.add_argument("--runs", default="runs", help="where to look for run folders (default runs)")
    p.add_argument("--questions", action="store_true", help="the learner questions, each with its chapter, "
                   "experiment, figure and expected outcome")
    p.set_defaults(fn=cmd_path)
    p = sub.add_parser("run", help="run a chapter: arl run CHAPTER [--preset smoke|mini|full] [key=value ...]",
                       add_help=False)
    p.add_argument("chapter")
    p.add_argument("overrides", nargs="*", help="config overrides, key=value")
    p.add_argument("--preset", default=None, help="smoke (seconds), mini (minutes on 2 cores; the default) or full (a real model)")
    p.add_argument("--out", default=None, help="root folder of run folders (runs/CHAPTER/NAME; default runs)")
    p.add_argument("--name", default=None, help="run folder name (default: a timestamp)")
    p.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue a run from its last checkpoint")
    p.add_argument("-h", "--help", dest="help_config", action="store_true", help="list the chapter's config fields")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("compare", help="run arms that differ in one variable, with the same seeds, and report")
    p.add_argument("chapter")
    p.add_argument("--vary", action="append", metavar="KEY=A,B,...",
                   help="one arm per value (repeat for one-at-a-time arms of several keys); each arm is compared with the earlier arm that differs from it only in its own key; "
                   "none: the preset alone over the seeds (seed replicates)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 for every arm (a larger N adds seeds)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting shared by every arm")
    p.add_argument("--preset", default="mini", help="the chapter preset every arm starts from")
    p.add_argument("--out", default=None, help="comparison folder (default runs/compare/CHAPTER-KEYS); rerun to resume or extend, "
                   "or give only --out to resume it as it is")
    p.add_argument("--jobs", type=int, default=None, help="runs at once, one torch thread each (default: one per core, at most 8)")
    p.add_argument("--report-only", action="store_true", help="write the report from the finished runs, run nothing")
    p.add_argument("--start-per-seed", action="store_true",
                   help="train the cold start (and OPD's teacher) once per seed (start_seed = seed) instead of sharing one: "
                        "slower, but the intervals then cover the start's variance, not only RL's")
    p.add_argument("--equal-compute", default=None, choices=["samples", "completions", "tokens", "teacher", "critic", "wall"],
                   help="after the arms run, add ARM@equal-KEY for each arm whose ledger column KEY differs from its "
                        "partner's by more than 10%%: the same switch at the steps that match the partner's compute")
    p.set_defaults(fn=cmd_compare)
    p = sub.add_parser("decide", help="a trained decision model's distribution for every question of a record (Jev)")
    p.add_argument("checkpoint", help="a Jev run folder (its final weights and fitted T) or a sampler checkpoint")
    p.add_argument("record", help='a JSON record: {"state": ..., "questions": [{"name", "type", "text", "options"?}]}')
    p.add_argument("--temperature", type=float, default=None, help="T of the softmax (default: the run's fitted T, else 1)")
    p.add_argument("--topk", type=int, default=64, help="top-K prompt logprobs read at each marker (0 = whole vocabulary)")
    p.set_defaults(fn=cmd_decide)
    p = sub.add_parser("audit", help="answer the four questions for a run: where the reward comes from, which tokens "
                       "carried gradient, what the run changed, which controls are missing")
    p.add_argument("run", help="a run folder (runs/CHAPTER/NAME)")
    p.add_argument("--baseline", default=None, metavar="RUN_DIR", help="diff the config against this run instead of "
                   "the chapter's nearest preset")
    p.set_defaults(fn=cmd_audit)
    p = sub.add_parser("show", help="an HTML page of a run's trajectories, each token coloured by who produced it")
    p.add_argument("run", help="run folder, e.g. runs/search-r1/NAME")
    p.add_argument("--step", type=int, default=None, help="training step whose rollouts to show (default: the last)")
    p.add_argument("--eval", default=None, metavar="NAME", help="show an evaluation's trajectories instead, e.g. step-0000")
    p.add_argument("--limit", type=int, default=32, help="trajectories drawn (the totals count them all)")
    p.add_argument("--group", type=int, default=None, help="draw only this group (one question's episodes)")
    p.add_argument("--out", default=None, help="where to write the page (default RUN/show-<step or eval>.html)")
    p.set_defaults(fn=cmd_show)
    p = sub.add_parser("serve", help="serve the Tinker REST API over the local engine, for the tinker SDK and cookbook, "
                       "and OpenAI-compatible /v1 endpoints")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--home", default=None, help="arl home for models and the served checkpoints (default ARL_HOME)")
    p.add_argument("--api-key", default=None, help="accept only requests with this X-API-Key or Bearer token (default "
                   "ARL_SERVE_API_KEY; none: any key)")
    p.add_argument("--quiet", action="store_true", help="no line per request")
    p.add_argument("--model", action="append", metavar="NAME=PATH", help="list a model under NAME on the OpenAI "
                   "endpoints (/v1/models); PATH: a checkpoint URI or folder, a run folder or a Hugging Face folder "
                   "(repeatable)")
    p.set_defaults(fn=cmd_serve)
    p = sub.add_parser("export", help="a checkpoint as a standard Hugging Face folder (transformers / peft load it)",
                       description="Write a checkpoint as a Hugging Face folder: config.json, model.safetensors, the "
                       "tokenizer with its chat template, generation_config.json (and a vision model's image processor). "
                       "A LoRA checkpoint is merged into its base with --merge, else kept as a peft adapter whose base "
                       "is named by its hub name or written beside it in base/ (docs/serve.md).")
    p.add_argument("source", metavar="RUN_DIR|arl://URI", help="a run folder (its newest checkpoint), a checkpoint URI "
                   "(arl://RUN/training_state/NAME, .../sampler_weights/NAME) or a checkpoint folder")
    p.add_argument("out_dir", metavar="OUT_DIR", help="the folder to write (must not exist, or be empty)")
    p.add_argument("--merge", action="store_true", help="fold a LoRA adapter into the base weights: one plain model folder")
    p.add_argument("--force", action="store_true", help="replace OUT_DIR when it holds an earlier export")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("demo", help="engine demo: sample, train a few steps, sample again")
    p.add_argument("--model", default="arl/tiny-qwen3-2m", help="base model (see `arl models`)")
    p.add_argument("--steps", type=int, default=30, help="supervised steps")
    p.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
    p.set_defaults(fn=cmd_demo)
    # key=value overrides may come after options too (`arl run grpo --preset mini loss_fn=ppo`)
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command != "run" or any(e.startswith("-") or "=" not in e for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides += extra
    with warnings.catch_warnings():  # restores the warning display when a caller (a test) goes on
        warnings.showwarning = _show_warning
        return _dispatch(args)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"arl: warning: {message}", file=sys.stderr)  # the message, without the library's source line


def _dispatch(args) -> int:
    try:
        if args.threads is not None and args.threads < 1:
            raise ValueError(f"--threads {args.threads}: must be at least 1")
        if args.threads:
            from . import settings

            settings.configure(num_threads=args.threads)
        return args.fn(args)
    except KeyboardInterrupt:
        print(f"arl {args.command}: interrupted; what was written is intact (a run resumes with --resume RUN_DIR)",
              file=sys.stderr)
        return 130
    except USER_ERRORS as e:
        if os.environ.get("ARL_DEBUG"):
            raise
        where = f"arl {args.command}" + (f" {args.chapter}" if getattr(args, "chapter", None) else "")
        hint = " (ARL_DEBUG=1 shows the traceback)" if isinstance(e, (RuntimeError, FloatingPointError)) else ""
        from .extras import MissingExtra

        if isinstance(e, MissingExtra):  # the install line is the whole story
            hint = ""
        print(f"{where}: {_one_line(e)}{hint}", file=sys.stderr)
        return 2


USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, PermissionError, RuntimeError,
               FloatingPointError)
"""What the command reports as one message instead of a traceback: bad input (ValueError, a missing or
existing file or folder), a run folder in use or a resume that cannot go on (RuntimeError), a refused
non-finite step (FloatingPointError)."""


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
