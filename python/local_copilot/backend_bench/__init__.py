"""`local-copilot bench`: measure backends the way the users did, with the plugin's own clients.

runner.py   the measurements (FIM latency, concurrency sweep) through backends/*.py
report.py   the terminal tables and the JSON document
png.py      a PNG chart written with zlib + struct (no plotting library)
cli.py      the command's arguments, progress bar and output files
"""
