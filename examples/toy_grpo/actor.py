"""The training side of the toy trainer: the actor, its checkpoints, and weight updates.

The actor computes REINFORCE gradients with group-normalised advantages (GRPO without ratio
clipping) and takes Adam steps; it logs Megatron-style `step <n>: {...}` lines, twice each.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import engine as toy
import numpy as np
from rollout import DataError, EngineClient, EventLog, canonical_sha256

ADAM_BETAS = (0.9, 0.999)


@dataclass
class TrainState:
    """Everything a checkpoint holds: weights, Adam moments, and where to resume."""

    weights: np.ndarray
    m: np.ndarray
    v: np.ndarray
    adam_step: int
    next_rollout_id: int

    @classmethod
    def fresh(cls, max_len: int) -> TrainState:
        """Zero weights: the uniform policy."""
        shape = (toy.feature_count(max_len), toy.VOCAB_SIZE)
        return cls(np.zeros(shape), np.zeros(shape), np.zeros(shape), 0, 0)


def load_checkpoint(directory: str | None, max_len: int) -> tuple[TrainState, Path] | None:
    """The checkpoint in `directory` (Megatron layout), or None when there is none."""
    if not directory:
        return None
    latest = Path(directory) / "latest_checkpointed_iteration.txt"
    if not latest.is_file():
        return None
    text = latest.read_text().strip()
    if not text.isdigit():
        raise DataError(f"{latest} does not hold an iteration number: {text[:40]!r}")
    path = Path(directory) / f"iter_{int(text):07d}" / "model.npz"
    try:
        with np.load(path) as data:
            state = TrainState(
                data["weights"],
                data["m"],
                data["v"],
                int(data["adam_step"]),
                int(data["next_rollout_id"]),
            )
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(f"cannot read checkpoint {path}: {exc}") from None
    if state.weights.shape != (toy.feature_count(max_len), toy.VOCAB_SIZE):
        raise DataError(f"checkpoint {path} was trained with another --rollout-max-response-len")
    return state, path


def save_checkpoint(directory: str, state: TrainState) -> Path:
    """Write `iter_<next rollout id>/model.npz` and point `latest_checkpointed_iteration.txt` at it."""
    folder = Path(directory) / f"iter_{state.next_rollout_id:07d}"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "model.npz.tmp"
    with tmp.open("wb") as fh:
        np.savez(
            fh,
            weights=state.weights,
            m=state.m,
            v=state.v,
            adam_step=state.adam_step,
            next_rollout_id=state.next_rollout_id,
        )
    os.replace(tmp, folder / "model.npz")
    latest = Path(directory) / "latest_checkpointed_iteration.txt"
    latest.with_suffix(".tmp").write_text(f"{state.next_rollout_id}\n")
    os.replace(latest.with_suffix(".tmp"), latest)
    return folder / "model.npz"


def group_advantages(samples: list[dict[str, Any]]) -> np.ndarray:
    """GRPO advantages: each reward minus its group's mean, over the group's std."""
    rewards = np.array([s["reward"] for s in samples], dtype=np.float64)
    groups = np.array([s["group_index"] for s in samples])
    adv = np.zeros_like(rewards)
    for g in np.unique(groups):
        mask = groups == g
        adv[mask] = (rewards[mask] - rewards[mask].mean()) / (rewards[mask].std() + 1e-6)
    return adv


def flatten(samples: list[dict[str, Any]], max_len: int) -> tuple[np.ndarray, ...]:
    """Per-token arrays of a batch: features, actions, owning sample, rollout log-probs."""
    digits, prev, pos, actions, owner, old = [], [], [], [], [], []
    for i, s in enumerate(samples):
        tokens = list(s["tokens"])
        k = len(tokens)
        digits += [s["prompt_digit"]] * k
        prev += [toy.BOS] + tokens[:-1]
        pos += list(range(k))
        actions += tokens
        owner += [i] * k
        old += list(s.get("rollout_log_probs") or [np.nan] * k)
    feats = toy.token_features(np.array(digits), np.array(prev), np.array(pos), max_len)
    return feats, np.array(actions), np.array(owner), np.array(old, dtype=np.float64)


class Trainer:
    """The actor: computes the policy gradient of each minibatch and takes an Adam step."""

    def __init__(self, args: argparse.Namespace, state: TrainState, events: EventLog) -> None:
        self.args = args
        self.state = state
        self.events = events
        self.log = toy.MilesLog("main")

    def train(self, rollout_id: int, samples: list[dict[str, Any]]) -> dict[str, float]:
        """Train on one rollout; returns the trainer-side timings."""
        args, state = self.args, self.state
        self.log(f"trained on rollout {rollout_id}: samples_sha256={canonical_sha256(samples)}")
        start = time.perf_counter()
        feats, actions, owner, old = flatten(samples, args.rollout_max_response_len)
        lp = toy.token_log_probs(state.weights, feats)
        chosen_all = lp[np.arange(actions.size), actions]
        logprob_diff = float(np.nanmean(np.abs(chosen_all - old))) if np.isfinite(old).any() else 0.0
        log_probs_time = time.perf_counter() - start
        adv = group_advantages(samples)
        gbs = args.global_batch_size or len(samples)
        steps_per_rollout = -(-len(samples) // gbs)
        for k in range(steps_per_rollout):
            idx = list(range(k * gbs, min(len(samples), (k + 1) * gbs)))
            batch = [samples[i] for i in idx]
            feats, actions, owner, _ = flatten(batch, args.rollout_max_response_len)
            lp = toy.token_log_probs(state.weights, feats)
            probs = np.exp(lp)
            w = adv[idx][owner] / len(batch)  # sequence-level sum, mean over samples
            loss = -float((w * lp[np.arange(actions.size), actions]).sum())
            g_logits = probs * w[:, None]  # d(loss)/d(logits) = w * (p - onehot)
            g_logits[np.arange(actions.size), actions] -= w
            grad = np.zeros_like(state.weights)
            np.add.at(grad, feats.ravel(), np.repeat(g_logits, feats.shape[1], axis=0))
            grad_norm = float(np.linalg.norm(grad))
            if args.clip_grad > 0 and grad_norm > args.clip_grad:
                grad *= args.clip_grad / grad_norm
            state.adam_step += 1
            b1, b2 = ADAM_BETAS
            state.m = b1 * state.m + (1 - b1) * grad
            state.v = b2 * state.v + (1 - b2) * grad * grad
            m_hat = state.m / (1 - b1**state.adam_step)
            v_hat = state.v / (1 - b2**state.adam_step)
            state.weights = state.weights - args.lr * m_hat / (np.sqrt(v_hat) + 1e-8)
            metrics = {
                "train/loss": loss,
                "train/grad_norm": grad_norm,
                "train/reward_mean": float(np.mean([s["reward"] for s in batch])),
                "train/entropy": float(-(probs * lp).sum(axis=1).mean()),
                "train/train_rollout_logprob_abs_diff": logprob_diff,
                "train/lr": args.lr,
            }
            step = rollout_id * steps_per_rollout + k
            for _ in range(2):  # Megatron logs every step line twice
                self.log(f"step {step}: {metrics!r}")
            self.events.metric(rollout_id, metrics, step=step)
        state.next_rollout_id = rollout_id + 1
        train_time = time.perf_counter() - start
        return {
            "log_probs": log_probs_time,
            "actor_train": train_time - log_probs_time,
            "train": train_time,
        }


def update_weights(engine: EngineClient, state: TrainState, args: argparse.Namespace) -> float:
    """Push the trainer's weights to the engine; returns the seconds it took."""
    log = toy.MilesLog("main")
    log("Timer update_weights start")
    start = time.perf_counter()
    if args.offload_train:
        time.sleep(engine.move_seconds)  # simulated: move the train weights off the GPU
    engine.call({"op": "update_weights", "weights": state.weights.tolist()})
    elapsed = time.perf_counter() - start
    log(f"Timer update_weights end (elapsed: {elapsed:.3f}s)")
    return elapsed
