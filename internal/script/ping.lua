-- ping: the health check of Client.Status and Client.Ping: a script call,
-- as every lock call is, so it also checks that the user may run scripts.
-- Takes no keys and no arguments; returns 1.
return 1
