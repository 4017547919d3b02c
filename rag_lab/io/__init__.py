"""Files in and out: input files read with errors that name the file and line (``files``), the run
folder's outputs (``run_folder``) and names and paths read from files kept inside their roots
(``safe_paths``)."""

from rag_lab.io.files import read_jsonl, read_lines, read_text, require_file, require_key

__all__ = ["read_jsonl", "read_lines", "read_text", "require_file", "require_key"]
