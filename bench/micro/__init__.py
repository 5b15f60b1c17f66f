"""The micro benchmark: every variant's app called in-process, one worker process each.

driver.py runs the workers (worker.py) and prints the tables; cities.py holds the data and
the requests, asgi.py the in-process ASGI calls, app_*.py one app per variant family.
"""
