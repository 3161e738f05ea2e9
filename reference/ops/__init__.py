"""One module per operator family; each registers its golden with ``@register``."""
