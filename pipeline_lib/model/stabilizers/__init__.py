"""Deep-Transformer stabilizers beyond post-LN, pre-LN, Admin and DLCL, one module each.

Each module holds one method's connection, init and constants, and a factory
(``config -> ResidualVariant``) that ``pipeline_lib.model.registry`` registers by name. The trainer,
the decoder and the workflow never name a method.
"""
