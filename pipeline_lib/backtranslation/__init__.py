"""Back-translation: mixing synthetic pairs into the real bitext (``python -m pipeline_lib.backtranslation``)."""
