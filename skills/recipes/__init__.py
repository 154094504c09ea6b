"""Command recipes: everyday shell work as tools with plain arguments, for small models."""
