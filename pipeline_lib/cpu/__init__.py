"""The CPU fast path: per-thread intra-op settings, the allocator policy for decoding, and the
weight-gradient sharing between ``--cpu-workers``. GPU runs use none of it."""
