"""Render the AI-assistant skill from the docs pages and snippet files, write its manifest, and check both."""
