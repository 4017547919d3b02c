"""``rag-lab llm-server --model PATH [--port 8000]`` (also ``python -m rag_lab.cli llm-server``):
serve a local causal LM behind an OpenAI-compatible endpoint (:func:`rag_lab.llm.server.serve`), so
``generator=openai`` and ``judge=ragas`` can run against a model on this machine. The model is
loaded (and warmed up) before the port opens; Ctrl-C stops the server.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from rag_lab.errors import user_errors


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="rag-lab llm-server",
        description="A small OpenAI-compatible server for a local causal LM (docs/answers.md).",
    )
    ap.add_argument("--model", required=True, help="model folder, HF id, or path to a .gguf file")
    ap.add_argument(
        "--gguf-file", default=None, help="GGUF file name inside --model (a folder or HF id)"
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 = any free port (printed)")
    ap.add_argument(
        "--served-model-name",
        default=None,
        help="name in /v1/models (default: the file or folder name)",
    )
    ap.add_argument(
        "--max-tokens", type=int, default=512, help="completion cap when a request sets none"
    )
    ap.add_argument(
        "--temperature", type=float, default=0.0, help="when a request sets none (0 = greedy)"
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument(
        "--api-key-env", default=None, help="require 'Authorization: Bearer $VAR' (a variable NAME)"
    )
    return ap


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s"
    )
    from rag_lab.generator.transformers import TransformersGenerator  # torch loads here
    from rag_lab.llm.server import serve

    model = TransformersGenerator(
        args.model, gguf_file=args.gguf_file, device=args.device, num_threads=args.threads
    )
    model.chat([{"role": "user", "content": "Hi"}], max_new_tokens=1)  # load before listening
    name = args.served_model_name or Path(model.gguf_file or model.path).stem
    server = serve(
        model, name, args.host, args.port, args.max_tokens, args.temperature, args.api_key_env
    )
    host, port = server.server_address[:2]
    print(f"rag_lab.llm.server: serving {name} at http://{host!s}:{port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
