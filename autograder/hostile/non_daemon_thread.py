# Hostile: a thread that never ends keeps the test process from exiting after its last test.
import threading as _threading
import time as _time

_threading.Thread(target=lambda: _time.sleep(10**6), daemon=False).start()
