"""Ghost text: when to ask the pipeline for what (latest wins per buffer, first part and
continuation, speculation, alternatives, warm-ups), and the render plans Lua draws."""
