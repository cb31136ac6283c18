from .transformer_config import TransformerConfig

__all__ = ["TransformerConfig"]
