"""Understanding the command a run was started with: what was trained, with which settings.

- `settings`: what a *setting* is (flags of the training argv, `env.<NAME>`, the names diff ignores).
- `envvars`: the environment variables a run records.
- `launcher`: the training argv from a launcher's xtrace (`+ ...`) and EXEC lines.
- `tracescan`: command lines and their continuations read back from the logs.
- `shim`: the python3/ray wrappers first on the job's PATH (exact training argv, debug flags).
- `dockerargv`: the image and options of a `docker run` argv.
"""
