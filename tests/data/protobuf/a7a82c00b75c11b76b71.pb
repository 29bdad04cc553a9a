
H
m.protom"
A
a (	Ra"
B
b (Rb
c (	Rcbproto3