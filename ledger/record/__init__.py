"""Record: prepare the staged run, run the job, derive its facts, commit it (or recover it)."""
