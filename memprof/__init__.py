"""memprof: predict, trace and gate the GPU memory of LLM serving deployments."""

from memprof.base.errors import MemprofError

__version__ = "0.1.0"

__all__ = ["MemprofError", "__version__"]
