"""Exporting trained checkpoints to other toolkits (fairseq, CTranslate2)."""
