"""tritensor.elastic.agent: the agents that start, watch and restart a job's workers (see :mod:`.server`)."""
