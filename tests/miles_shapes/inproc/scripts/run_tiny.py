from dataclasses import dataclass

import miles.utils.external_utils.command_utils as U


@dataclass
class ScriptArgs(U.ExecuteTrainConfig):
    run_id: str = U.create_run_id()
    model_type: str = "tiny-instruct"


def execute(args: ScriptArgs) -> None:
    ckpt_args = f"--save {args.output_dir}/{args.run_id}/checkpoints --save-interval 20 "
    optimizer_args = "--optimizer adam --lr 1e-6 --weight-decay 0.1 "
    wandb_args = f"--use-wandb --wandb-project miles-tiny --wandb-group {args.run_id} "
    misc_args = (
        f"--actor-num-nodes {args.num_nodes} --colocate "
        "--sglang-router-port 30000 "
        f"--dump-details {args.output_dir}/{args.run_id}/dump_details "
    )
    U.execute_train(train_args=f"{ckpt_args}{optimizer_args}{wandb_args}{misc_args}", model_type=args.model_type)


if __name__ == "__main__":
    execute(ScriptArgs())
