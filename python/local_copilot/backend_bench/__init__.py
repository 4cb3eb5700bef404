"""`local-copilot bench`: measure backends the way the users did, with the plugin's own clients.

runner.py   the measurements (FIM latency, concurrency sweep) through backends/*.py
report.py   the text tables and the JSON document
chart.py    the PNG chart, drawn with matplotlib (the optional extra `bench`)
cli.py      the command's arguments, progress bar and output files
"""
