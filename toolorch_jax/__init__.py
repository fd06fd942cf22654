"""toolorch_jax: ToolOrchestra in JAX."""
