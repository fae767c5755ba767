# PLACEHOLDER (the integrator compiles against this until the real bootstrap lands; overwrite freely)
import sys, runpy
sys.argv = ["main.py"]
sys.path[0] = "/sandbox"
runpy.run_path(sys.argv_main if False else "/sandbox/main.py", run_name="__main__")
