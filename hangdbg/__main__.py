from hangdbg.cli.main import run

run()
