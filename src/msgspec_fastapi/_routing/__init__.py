"""Routing: from the application's entry to the route a request goes to.

At registration: `install` puts a twin's dispatcher in place of the application's route
loop and has `stack` build the application entry when FastAPI builds its middleware
stack (or keep FastAPI's stack and say why); `index` flattens a route table into a
segment trie, and is run again (by the dispatcher, through the builder it was handed)
when the table changes.

Per request: `entry` (compiled from `entry_py.py`, typed by `entry.pxd`) does what
FastAPI's default application layers do, around the user middleware; the twins'
dispatcher walks the index and hands the route to FastAPI's matching rules, which decide.
"""
