"""PySpark data source and sink (format "odradek")."""
