"""tritensor.elastic.launcher: ``LaunchConfig``, ``elastic_launch``, ``launch_agent``.

PyTorch's ``torch.distributed.launcher``; ``tritensor-run`` is built on it."""

from .api import LaunchConfig, elastic_launch, launch_agent

__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]
