"""What every package of the project shares and that is not about any one of them: the error hierarchy
(``cypherturn.errors``), the command lines' error printing and exit codes (``cypherturn.cli``) and a small
thread-safe LRU cache (``cypherturn.lru``). It imports no other package of the project."""
