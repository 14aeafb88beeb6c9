"""The database: engine and migrations, the tables, the row writer, upstream secrets at rest."""
