"""Replaying a recorded run: argv building, the rollout link folder, and the replay itself."""
