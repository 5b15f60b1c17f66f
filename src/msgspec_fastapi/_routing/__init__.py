"""Routing: finding the route a request goes to, without FastAPI's loop over every route.

At registration: `install` puts a twin's dispatcher in place of the application's route
loop; `index` flattens a route table into a segment trie, and is run again (by the
dispatcher, through the builder `install` handed it) when the table changes.

Per request: the twins' dispatcher walks the index and hands the route to FastAPI's
matching rules, which decide.
"""
