"""A small but real GRPO trainer that speaks Miles' command line and log formats (numpy only).

The task: the prompt is a digit d; the right answer is the digit (d + 1) % 10, then the end
token. Reward: 1 for the right first token, minus 0.05 per generated token; -1 for an answer that
starts with the end token. The policy is a linear softmax over 11 tokens. The sampler ("SGLang
engine", engine.py) runs in a separate process, the rollout manager (rollout.py) scores its
answers, and the actor (actor.py) trains with REINFORCE on group-normalised advantages (GRPO
without ratio clipping) and Adam. README.md lists the flags and the log lines.
"""

from __future__ import annotations

import argparse
import json
import string
import sys
import time

import engine as toy  # the sibling engine.py: policy math and log helpers
from actor import Trainer, TrainState, load_checkpoint, save_checkpoint, update_weights
from rollout import DataError, EngineClient, EventLog, RolloutManager, UsageError


def build_parser() -> argparse.ArgumentParser:
    """The command line, with Miles' flag names."""
    p = argparse.ArgumentParser(prog="train.py", description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--rollout-seed", type=int, default=42)
    p.add_argument("--num-rollout", type=int, default=8, help="exclusive end of the rollout ids")
    p.add_argument("--start-rollout-id", type=int, default=None)
    p.add_argument("--rollout-batch-size", type=int, default=8)
    p.add_argument("--n-samples-per-prompt", type=int, default=8)
    p.add_argument("--rollout-max-response-len", type=int, default=24)
    p.add_argument("--rollout-temperature", type=float, default=1.0)
    p.add_argument("--global-batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--clip-grad", type=float, default=1.0)
    p.add_argument("--save", default=None, help="checkpoint directory")
    p.add_argument("--load", default=None, help="checkpoint directory to resume from")
    p.add_argument("--save-interval", type=int, default=None)
    p.add_argument("--eval-interval", type=int, default=None)
    p.add_argument("--save-debug-rollout-data", default=None, metavar="TEMPLATE")
    p.add_argument("--load-debug-rollout-data", default=None, metavar="TEMPLATE")
    p.add_argument("--debug-train-only", action="store_true")
    p.add_argument("--debug-rollout-only", action="store_true")
    p.add_argument("--save-debug-event-data", default=None, metavar="DIR")
    p.add_argument("--colocate", action="store_true")
    p.add_argument("--offload", action="store_true")
    p.add_argument("--offload-train", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--offload-rollout", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--sglang-mem-fraction-static", type=float, default=0.8)
    p.add_argument("--env-report", default=None, metavar="JSON")
    # Accepted so launchers can pass them as Miles' do; the toy never contacts wandb.
    p.add_argument("--use-wandb", action="store_true")
    p.add_argument("--wandb-project", default=None)
    p.add_argument("--wandb-group", default=None)
    p.add_argument("--wandb-key", default=None)
    return p


def _check_template(flag: str, template: str, with_eval: bool) -> None:
    """A template must name `{rollout_id}` and format ids (and `eval_<n>` ids with evals)."""
    ids: list[int | str] = [0, "eval_0"] if with_eval else [0]
    try:
        parsed = list(string.Formatter().parse(template))
        if "rollout_id" not in {name for _, name, _, _ in parsed}:
            raise UsageError(f"{flag} {template!r} must contain the field {{rollout_id}}")
        for rollout_id in ids:
            template.format(rollout_id=rollout_id)
    except (KeyError, IndexError, ValueError) as exc:
        hint = " (with --eval-interval it also gets ids like eval_0)" if with_eval else ""
        raise UsageError(f"{flag} {template!r} is not a usable template: {exc}{hint}") from None


def validate(args: argparse.Namespace) -> None:
    """Check flag combinations and resolve implied settings, as Miles' argument checks do."""
    if args.debug_train_only and args.debug_rollout_only:
        raise UsageError("--debug-train-only and --debug-rollout-only cannot be combined")
    if args.load_debug_rollout_data:
        _check_template("--load-debug-rollout-data", args.load_debug_rollout_data, False)
        if args.debug_rollout_only:
            raise UsageError("--load-debug-rollout-data implies train-only; drop --debug-rollout-only")
        args.debug_train_only = True  # loaded data replaces the engines
    elif args.debug_train_only:
        raise UsageError("--debug-train-only needs --load-debug-rollout-data (no engine samples)")
    if args.save_debug_rollout_data:
        evals = args.eval_interval is not None
        _check_template("--save-debug-rollout-data", args.save_debug_rollout_data, evals)
    for flag in (
        "rollout_batch_size",
        "n_samples_per_prompt",
        "rollout_max_response_len",
    ):
        if getattr(args, flag) < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1")
    for flag in ("global_batch_size", "save_interval", "eval_interval"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.rollout_temperature < 0 or not 0 < args.sglang_mem_fraction_static <= 1:
        raise UsageError("--rollout-temperature must be >= 0 and --sglang-mem-fraction-static in (0, 1]")
    if args.env_report is not None:
        try:
            args.env_report = json.loads(args.env_report)
        except ValueError as exc:
            raise UsageError(f"--env-report is not JSON: {exc}") from None
        if not isinstance(args.env_report, dict):
            raise UsageError("--env-report must be a JSON object, e.g. '{}'")
    # --colocate and --offload turn both offloads on unless negated.
    for side in ("train", "rollout"):
        if getattr(args, f"offload_{side}") is None:
            setattr(args, f"offload_{side}", args.colocate or args.offload)


def run(args: argparse.Namespace) -> int:
    """The training loop: generate (or load) each rollout, train on it, update the engine."""
    log = toy.MilesLog("main")
    if args.env_report is not None:
        toy.emit("ENV_REPORT_JSON=" + json.dumps(toy.env_report("main", args.env_report)))
    if args.wandb_key or args.use_wandb:
        log("wandb: disabled in the toy trainer; the wandb flags are accepted and ignored")
    loaded = load_checkpoint(args.load, args.rollout_max_response_len)
    if loaded is not None:
        state, path = loaded
        start = args.start_rollout_id if args.start_rollout_id is not None else state.next_rollout_id
        log(f"Loaded checkpoint {path}; start_rollout_id={start}")
    else:
        state, start = TrainState.fresh(args.rollout_max_response_len), 0
        if args.start_rollout_id is not None:
            log(f"--start-rollout-id {args.start_rollout_id} ignored: no checkpoint at --load {args.load!r}; start_rollout_id reset to 0")
    main_events = EventLog(args.save_debug_event_data, "main")
    rollout_events = EventLog(args.save_debug_event_data, "rollout_manager")
    engine = None
    if not args.debug_train_only:
        engine = EngineClient(
            {
                "seed": args.seed,
                "engine_rank": 0,
                "max_len": args.rollout_max_response_len,
                "offload_rollout": args.offload_rollout,
                "env_report": args.env_report,
                "mem_fraction_static": args.sglang_mem_fraction_static,
            }
        )
    try:
        move = engine.move_seconds if engine else state.weights.size * toy.MOVE_SECONDS_PER_PARAM
        log(
            f"offload: train={args.offload_train} rollout={args.offload_rollout}; "
            f"simulated weight move: {move:.4f}s ({state.weights.size} parameters)"
        )
        manager = RolloutManager(args, engine, rollout_events)
        trainer = None if args.debug_rollout_only else Trainer(args, state, main_events)
        pending_update = update_weights(engine, state, args) if engine else 0.0
        for rollout_id in range(start, args.num_rollout):
            wait_start = time.perf_counter()
            samples = manager.get(rollout_id)
            wait = time.perf_counter() - wait_start
            if trainer is None:
                continue
            log("Timer train start")
            times = trainer.train(rollout_id, samples)
            log(f"Timer train end (elapsed: {times['train']:.3f}s)")
            perf = {
                "perf/train_time": times["train"],
                "perf/train_wait_time": wait,
                "perf/step_time": wait + times["train"],
                "perf/actor_train_time": times["actor_train"],
                "perf/log_probs_time": times["log_probs"],
                "perf/update_weights_time": pending_update,
            }
            log(f"perf {rollout_id}: {perf!r}")
            main_events.metric(rollout_id, perf)
            if args.save and args.save_interval and (rollout_id + 1) % args.save_interval == 0:
                log(f"Saved checkpoint {save_checkpoint(args.save, state)}")
            if engine is not None:
                pending_update = update_weights(engine, state, args)
            if engine is not None and args.eval_interval and (rollout_id + 1) % args.eval_interval == 0:
                manager.eval(rollout_id)
        if args.save and trainer is not None and start < args.num_rollout:
            log(f"Saved checkpoint {save_checkpoint(args.save, state)}")
    finally:
        if engine is not None:
            engine.close()
    log("Training finished")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse flags and train; exit 2 on bad usage, 1 on missing or broken inputs."""
    args = build_parser().parse_args(argv)
    try:
        validate(args)
        return run(args)
    except UsageError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 2
    except DataError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
