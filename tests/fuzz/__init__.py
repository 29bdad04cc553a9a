"""Coverage-guided fuzzing of kbatch (atheris); see README.md here."""
