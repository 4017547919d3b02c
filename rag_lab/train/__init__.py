"""Fine-tuning from labelled data: ``rag-lab train embedder`` (LoRA/full, MNRL) and ``rag-lab train
reranker`` (cross-encoder), sharing training-pair mining, the leakage guard and dev selection."""
