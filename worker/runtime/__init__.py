"""The runtime: the arq worker, claims of running jobs, the job envelope, payload checks, CPU slots."""
