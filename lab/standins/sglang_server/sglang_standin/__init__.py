"""Stand-in for SGLang's launcher on machines without GPUs (eagle3.extraction tests only)."""

VERSION = '0.1.0'
