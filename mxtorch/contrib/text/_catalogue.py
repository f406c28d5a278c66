"""The pre-trained files MXNet 1.9's GloVe and fastText embeddings know by name.

Public facts about the two projects' releases: GloVe's ten text files, and fastText's vectors
for 294 Wikipedia editions (``wiki.<code>.vec``), 30 aligned ones (``wiki.multi.<code>.vec``)
and three English sets.  mxtorch never downloads them; the names say which file to unpack where.
"""

from __future__ import annotations

__all__ = ["GLOVE_FILES", "FASTTEXT_FILES"]

GLOVE_FILES: tuple[str, ...] = (
    "glove.42B.300d.txt", "glove.6B.50d.txt", "glove.6B.100d.txt", "glove.6B.200d.txt",
    "glove.6B.300d.txt", "glove.840B.300d.txt", "glove.twitter.27B.25d.txt",
    "glove.twitter.27B.50d.txt", "glove.twitter.27B.100d.txt", "glove.twitter.27B.200d.txt",
)

_WIKI_EDITIONS = """
aa ab ace ady af ak als am an ang ar arc arz as ast av ay az azb ba bar bat_smg bcl be bg bh bi bjn
bm bn bo bpy br bs bug bxr ca cbk_zam cdo ce ceb ch cho chr chy ckb co cr crh cs csb cu cv cy da de
diq dsb dv dz ee el eml en eo es et eu ext fa ff fi fiu_vro fj fo fr frp frr fur fy ga gag gan gd gl
glk gn gom got gu gv ha hak haw he hi hif ho hr hsb ht hu hy hz ia id ie ig ii ik ilo io is it iu ja
jam jbo jv ka kaa kab kbd kg ki kj kk kl km kn ko koi kr krc ks ksh ku kv kw ky la lad lb lbe lez lg
li lij lmo ln lo lrc lt ltg lv mai map_bms mdf mg mh mhr mi min mk ml mn mo mr mrj ms mt mus mwl my
myv mzn na nah nap nds nds_nl ne new ng nl nn no nov nrm nso nv ny oc olo om or os pa pag pam pap
pcd pdc pfl pi pih pl pms pnb pnt ps pt qu rm rmy rn ro roa_rup roa_tara ru rue rw sa sah sc scn sco
sd se sg sh si simple sk sl sm sn so sq sr srn ss st stq su sv sw szl ta tcy te tet tg th ti tk tl
tn to tpi tr ts tt tum tw ty tyv udm ug uk ur uz ve vec vep vi vls vo wa war wo wuu xal xh xmf yi yo
za zea zh zh_classical zh_min_nan zh_yue zu
""".split()

_ALIGNED_EDITIONS = """
ar bg ca cs da de el en es et fi fr he hr hu id it mk nl no pl pt ro ru sk sl sv tr uk vi
""".split()

FASTTEXT_FILES: tuple[str, ...] = (
    "crawl-300d-2M.vec", "wiki-news-300d-1M.vec", "wiki-news-300d-1M-subword.vec",
    *(f"wiki.{code}.vec" for code in _WIKI_EDITIONS),
    *(f"wiki.multi.{code}.vec" for code in _ALIGNED_EDITIONS),
)
