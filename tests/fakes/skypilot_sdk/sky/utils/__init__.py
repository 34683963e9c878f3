"""sky.utils, as far as the kit reaches into it."""
