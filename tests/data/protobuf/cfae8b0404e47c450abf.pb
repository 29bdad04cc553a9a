
Ñ
mi.protomi"
First
a (Ra"¡
Second
b (	Rbˆ
Deep
c (Rc$
m (2.mi.Second.Deep.MEntryRm4
MEntry
key (	Rkey
value (	Rvalue:8
Deeper
d (Rdbproto3