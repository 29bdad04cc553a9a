
Š
p2.protop2"z
M
id (Rid
s (	:dfltRs
n (:5Rn
r (BRr
k (2
.p2.M.KindRk"
Kind
A
B