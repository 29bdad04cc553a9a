
\
m.protop"
Sub
z (Rz"9
M
one (2.p.SubRone
many (2.p.SubRmany